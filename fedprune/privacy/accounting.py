"""(ε, δ) of repeated Gaussian mechanisms: the RDP accountant of ``dp_accounting``.

A release is a Gaussian mechanism with noise multiplier ``z`` (noise std = ``z`` times the
release's L2 sensitivity); ``rounds`` of them compose (``SelfComposedDpEvent``), each
Poisson-subsampled with ``sampling_rate`` when only a fraction of the clients takes part
(``PoissonSampledDpEvent``). Used by AS-CFL's noisy aggregation (client-level DP of the
cluster models, :mod:`fedprune.algorithms.ascfl.noisy_aggregation`) and by the noisy
clustering upload of the CA-AFP pipeline (:mod:`fedprune.privacy.local`).
"""

from __future__ import annotations

import dataclasses

import dp_accounting
from dp_accounting.rdp import RdpAccountant

from fedprune import checks


def _check_accounting(rounds: int, delta: float, sampling_rate: float) -> None:
    checks.check_count("rounds", rounds)
    checks.check_range("dp_delta", delta, 0, 1, low_open=True, high_open=True)
    checks.check_range("sampling_rate", sampling_rate, 0, 1, low_open=True)


def _run_event(noise_multiplier: float, rounds: int, sampling_rate: float) -> object:
    gaussian = dp_accounting.GaussianDpEvent(noise_multiplier)
    per_round = (
        gaussian
        if sampling_rate == 1
        else dp_accounting.PoissonSampledDpEvent(sampling_rate, gaussian)
    )
    return dp_accounting.SelfComposedDpEvent(per_round, rounds)


@dataclasses.dataclass(frozen=True)
class PrivacySpent:
    """(ε, δ) of a run, with the settings it was computed for."""

    epsilon: float
    delta: float
    noise_multiplier: float
    rounds: int
    sampling_rate: float


def privacy_spent(
    noise_multiplier: float, rounds: int, delta: float, sampling_rate: float = 1.0
) -> PrivacySpent:
    """Client-level (ε, δ) of ``rounds`` noisy aggregations with noise multiplier ``z``
    (RDP accountant, add/remove-one-client adjacency; module docstring)."""
    checks.check_positive("noise_multiplier", noise_multiplier)
    _check_accounting(rounds, delta, sampling_rate)
    accountant = RdpAccountant()
    accountant.compose(_run_event(noise_multiplier, rounds, sampling_rate))
    epsilon = float(accountant.get_epsilon(delta))
    return PrivacySpent(epsilon, delta, noise_multiplier, rounds, sampling_rate)


def noise_multiplier_for(
    epsilon: float, delta: float, rounds: int, sampling_rate: float = 1.0
) -> float:
    """The smallest noise multiplier ``z`` (to 1e-6) whose run spends at most ``epsilon`` at
    ``delta``: AS-CFL 4.1 "with the noise scale, σ calculated accordingly" (then ``σ`` follows
    from ``z``, ``C`` and the weights,
    :func:`fedprune.algorithms.ascfl.noisy_aggregation.noise_std`)."""
    checks.check_positive("dp_epsilon", epsilon)
    _check_accounting(rounds, delta, sampling_rate)
    return float(
        dp_accounting.calibrate_dp_mechanism(
            RdpAccountant,
            lambda z: _run_event(z, rounds, sampling_rate),
            epsilon,
            delta,
        )
    )
