"""Importance scores of CA-AFP (Eq. 8-11) from aggregated client statistics.

All inputs are per prunable tensor lists. The statistics are what the federated computation
returns: the cluster model ``w``; the clients' mean of their locally trained weights and of
their squares (so the variance across clients, Eq. 10, is E[w²] - E[w]² and no individual
client model leaves the aggregation); and the clients' mean gradient sign (Eq. 11).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedprune.errors import ConfigError


def check_weights(alpha: float, beta: float, gamma: float) -> None:
    """Eq. 8 requires alpha + beta + gamma = 1, each in [0, 1]."""
    for name, v in (("alpha", alpha), ("beta", beta), ("gamma", gamma)):
        if not 0.0 <= v <= 1.0:
            raise ConfigError(f"{name} must be in [0, 1], got {v}")
    if abs(alpha + beta + gamma - 1.0) > 1e-6:
        raise ConfigError(f"alpha + beta + gamma must be 1, got {alpha + beta + gamma:g}")


def magnitude(weights: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Eq. 9: |w| / max |u| over all prunable weights of the cluster model."""
    top = max(float(np.max(np.abs(w))) for w in weights)
    return [np.abs(w) / top if top > 0 else np.zeros_like(w) for w in weights]


def coherence(mean_w: Sequence[np.ndarray], mean_w2: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Eq. 10: 1 / (1 + Var_k w_k), Var from the clients' means of w and w²."""
    return [1.0 / (1.0 + np.maximum(m2 - m * m, 0.0)) for m, m2 in zip(mean_w, mean_w2)]


def consistency(mean_sign: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Eq. 11: |mean_k sign(dL_k/dw)|."""
    return [np.abs(s) for s in mean_sign]


def importance(
    weights: Sequence[np.ndarray],
    mean_w: Sequence[np.ndarray],
    mean_w2: Sequence[np.ndarray],
    mean_sign: Sequence[np.ndarray],
    alpha: float,
    beta: float,
    gamma: float,
) -> list[np.ndarray]:
    """Eq. 8: alpha * Mag + beta * Coh + gamma * Con, per weight."""
    check_weights(alpha, beta, gamma)
    return [
        alpha * m + beta * h + gamma * c
        for m, h, c in zip(magnitude(weights), coherence(mean_w, mean_w2), consistency(mean_sign))
    ]
