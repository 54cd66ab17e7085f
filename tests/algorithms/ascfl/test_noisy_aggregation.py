import numpy as np
import pytest
from scipy import optimize, stats

from fedprune.algorithms.ascfl.noisy_aggregation import (
    aggregate_cluster,
    clip_updates,
    noise_std,
)
from fedprune.privacy.accounting import noise_multiplier_for, privacy_spent


def test_weighted_average_without_clipping():
    result = aggregate_cluster(np.array([[3.0, 4.0], [0.0, 1.0]]), [1, 3])
    # p = (1/4, 3/4): (0.75, 1 + 0.75)
    assert result.update == pytest.approx([0.75, 1.75])
    assert result.noise_std == 0.0 and result.clipped.tolist() == [False, False]


def test_clipping_then_weighted_average_by_hand():
    result = aggregate_cluster(np.array([[3.0, 4.0], [0.0, 1.0]]), [1, 3], clip_norm=1.0)
    # (3, 4) has norm 5 -> (0.6, 0.8); (0, 1) is within the bound
    assert result.update == pytest.approx([0.25 * 0.6, 0.25 * 0.8 + 0.75 * 1.0])
    assert result.clipped.tolist() == [True, False]
    clipped, _ = clip_updates([[0.0, 0.0], [6.0, 8.0]], 5.0)
    assert clipped == pytest.approx(np.array([[0.0, 0.0], [3.0, 4.0]]))


def test_noise_std_for_each_placement():
    # equal weights: z C / n; unequal: z C max p, or z C sqrt(sum p^2) per client
    assert noise_std(2.0, 1.5, [0.25] * 4) == pytest.approx(0.75)
    assert noise_std(1.0, 2.0, [0.25, 0.25, 0.5]) == pytest.approx(1.0)
    assert noise_std(1.0, 2.0, [0.25, 0.25, 0.5], "client") == pytest.approx(2 * np.sqrt(0.375))


@pytest.mark.parametrize("placement", ["aggregate", "client"])
def test_noise_has_the_reported_spread(placement):
    d = 200_000
    rng = np.random.default_rng(1)
    updates = rng.normal(size=(3, d)) * 0.01  # norms ~4.5, clipped to 1
    clean = aggregate_cluster(updates, [1, 1, 2], clip_norm=1.0).update
    noisy = aggregate_cluster(
        updates, [1, 1, 2], clip_norm=1.0, noise_multiplier=2.0, placement=placement, rng=3
    )
    expected = 1.0 if placement == "aggregate" else 2 * np.sqrt(0.375)
    assert noisy.noise_std == pytest.approx(expected)
    noise = noisy.update - clean
    # the sample std of 200,000 normals is within 0.5 % of sigma (std error 0.16 %)
    assert noise.std() == pytest.approx(expected, rel=5e-3)
    assert abs(noise.mean()) < 5 * expected / np.sqrt(d)


def test_fixed_seed_matches_a_numpy_reference():
    updates = np.array([[3.0, 4.0, 0.0], [0.0, 1.0, 0.0]])
    got = aggregate_cluster(updates, [1, 3], clip_norm=1.0, noise_multiplier=0.5, rng=42)
    # sensitivity C max p = 0.75, sigma = 0.375, one draw of 3 normals from default_rng(42)
    reference = np.array([0.15, 0.95, 0.0]) + np.random.default_rng(42).normal(0, 0.375, 3)
    assert got.update == pytest.approx(reference)
    again = aggregate_cluster(
        updates, [1, 3], clip_norm=1.0, noise_multiplier=0.5, rng=np.random.default_rng(42)
    )
    assert again.update == pytest.approx(got.update)


def test_epsilon_falls_with_noise_and_grows_with_rounds():
    eps = [privacy_spent(z, 20, 1e-5).epsilon for z in (0.8, 1.0, 2.0, 4.0)]
    assert all(a > b for a, b in zip(eps, eps[1:]))
    assert privacy_spent(1.0, 10, 1e-5).epsilon < privacy_spent(1.0, 20, 1e-5).epsilon
    # sampling half of the clients each round amplifies privacy
    assert privacy_spent(1.0, 20, 1e-5, 0.5).epsilon < privacy_spent(1.0, 20, 1e-5).epsilon


def _rdp_bound(alpha, rounds, z, delta):
    # RDP of the Gaussian mechanism: rounds * alpha / (2 z^2); conversion to (eps, delta) of
    # Canonne, Kamath, Steinke 2020 (Prop. 12 of arXiv:2004.00010)
    return rounds * alpha / (2 * z**2) + np.log1p(-1 / alpha) - np.log(delta * alpha) / (alpha - 1)


def _exact_gaussian_epsilon(mu, delta):
    # Balle and Wang 2018: the Gaussian mechanism with sensitivity / sigma = mu is (eps, delta)
    # DP for delta = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu), the tightest possible eps
    def gap(eps):
        return (
            stats.norm.cdf(mu / 2 - eps / mu)
            - np.exp(eps) * stats.norm.cdf(-mu / 2 - eps / mu)
            - delta
        )

    return optimize.brentq(gap, 0.0, 100.0)


@pytest.mark.parametrize(("z", "rounds"), [(2.0, 10), (1.1, 50), (5.0, 100)])
def test_epsilon_against_independent_computations(z, rounds):
    delta = 1e-5
    eps = privacy_spent(z, rounds, delta).epsilon
    # the accountant minimizes the same conversion over a grid of orders: never below the
    # continuous minimum, and close to it
    best = optimize.minimize_scalar(
        lambda a: _rdp_bound(a, rounds, z, delta), bounds=(1.02, 500), method="bounded"
    )
    assert best.fun - 1e-9 <= eps <= best.fun * 1.01
    # T Gaussian releases with noise z compose exactly to one with noise z / sqrt(T); RDP
    # accounting is an upper bound on that exact epsilon
    exact = _exact_gaussian_epsilon(np.sqrt(rounds) / z, delta)
    assert exact < eps < 1.5 * exact


def test_noise_multiplier_for_a_target_epsilon():
    z = noise_multiplier_for(2.0, 1e-5, 20)
    assert 2.0 - 1e-3 < privacy_spent(z, 20, 1e-5).epsilon <= 2.0
    assert privacy_spent(0.99 * z, 20, 1e-5).epsilon > 2.0


def test_tff_dp_aggregator_clips_averages_and_adds_noise_of_the_right_size(tff_context):
    from fedprune.privacy import dp_mean

    # no noise: the clipped, unweighted mean ([3, 4] is clipped to [0.6, 0.8])
    updates = np.array([[3.0, 4.0] + [0.0] * 998, [0.0, 1.0] + [0.0] * 998])
    mean = dp_mean.dp_mean(updates, clip_norm=1.0, noise_multiplier=0.0)
    np.testing.assert_allclose(mean[:2], [0.3, 0.9], atol=1e-6)
    np.testing.assert_allclose(mean[2:], 0.0, atol=1e-7)
    # noise: N(0, (z C / n)²) per coordinate on the mean, z = 2, C = 1, n = 2 -> std 1
    noisy = dp_mean.dp_mean(updates, clip_norm=1.0, noise_multiplier=2.0)
    assert 0.9 < np.std(noisy[2:]) < 1.1 and abs(np.mean(noisy[2:])) < 0.1
