"""The noised clustering upload (fedprune.privacy.local): each row clipped and noised on its
own through TFF's DP aggregator, and its (ε, δ) against the exact Gaussian mechanism."""

import numpy as np
import pytest
from scipy import optimize, stats

from fedprune.errors import ConfigError
from fedprune.privacy.local import DELTA, UploadNoise


def _exact_gaussian_epsilon(mu: float, delta: float) -> float:
    # Balle and Wang 2018: a Gaussian mechanism with sensitivity / sigma = mu is (eps, delta)
    # DP for delta = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu), the tightest eps
    def gap(eps: float) -> float:
        return (
            stats.norm.cdf(mu / 2 - eps / mu)
            - np.exp(eps) * stats.norm.cdf(-mu / 2 - eps / mu)
            - delta
        )

    return optimize.brentq(gap, 0.0, 200.0)


@pytest.mark.parametrize("z, passes", [(2.0, 1), (4.0, 1), (4.0, 3)])
def test_epsilon_bounds_the_exact_one_for_sensitivity_twice_the_clip(z, passes):
    record = UploadNoise(z, clip_norm=0.5).record(passes)
    # any two clipped uploads differ by at most 2C; sigma = z C: mu = 2 / z per upload,
    # sqrt(passes) * mu for passes uploads (Gaussian mechanisms compose in mu)
    exact = _exact_gaussian_epsilon(np.sqrt(passes) * 2.0 / z, DELTA)
    assert exact < record["epsilon"] < 1.5 * exact
    assert (record["uploads_per_client"], record["delta"]) == (passes, DELTA)


def test_more_noise_spends_less():
    assert UploadNoise(8.0, 1.0).record(1)["epsilon"] < UploadNoise(2.0, 1.0).record(1)["epsilon"]


def test_each_row_is_clipped_on_its_own(tff_context):
    rows = np.array([[3.0, 4.0, 0.0], [0.3, 0.4, 0.0]])
    noised = UploadNoise(1e-9, clip_norm=1.0).apply(rows)
    np.testing.assert_allclose(noised, [[0.6, 0.8, 0.0], [0.3, 0.4, 0.0]], atol=1e-6)


def test_noise_has_std_z_times_the_clip_on_every_value(tff_context):
    rows = np.zeros((3, 4000))
    noised = UploadNoise(2.0, clip_norm=0.5).apply(rows)
    assert noised.shape == rows.shape
    assert all(0.95 < np.std(row) < 1.05 for row in noised)  # z C = 1
    assert all(abs(np.mean(row)) < 0.06 for row in noised)
    assert not np.allclose(noised[0], noised[1])  # every client draws its own noise


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: UploadNoise(0.0, 1.0), "--cluster-signal-noise must be"),
        (lambda: UploadNoise(1.0, -1.0), "--cluster-signal-clip must be"),
        (lambda: UploadNoise(1.0, 1.0).apply(np.array([1.0, np.nan])), "finite"),
    ],
)
def test_bad_settings_and_signals_are_refused(make, message):
    with pytest.raises((ConfigError, ValueError), match=message):
        make()
