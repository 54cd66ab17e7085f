"""Bidirectional cluster association by reconstruction-error differences (FedCRef, Phase 2).

Algorithm 1 lines 11-16 and Eq. 2: cluster Q_a (owned by one client) and Q_b (owned by
another) are associated when, on Q_a's samples, the differences between the errors of Q_a's
own model and of Q_b's model, normalized to [0, 1], have their alpha-th percentile <= theta,
*and* the same holds the other way round on Q_b's samples.

Interpretation of ``Normalize_[0,1]``: min-max scaling of the difference vector of one
cluster (the literal reading; a constant vector scales to zeros). Measured on MNIST with the
paper's system (25 clients, S = 500, dirtiness 0.3, first iteration, 82 clusters): at
theta = 0.2 it gives 102 associations, 2 of them wrong, 11 communities and 19 isolated
clusters -- the paper's behaviour. Scaling both error vectors jointly instead would give one
giant community (362 associations, 76 wrong); on small systems (8 clients, S = 300, fewer
training steps) the literal reading is stricter (same-class pairs score ~0.3). See
DEVELOPERS.md.
Clusters of the same client are never compared (the paper pairs clusters of C_i and C_j).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedprune.errors import ConfigError


def check_thresholds(alpha: float, theta: float) -> None:
    """Fail with one clear line on an impossible percentile or threshold."""
    if not 0 < alpha <= 100:
        raise ConfigError(f"alpha (percentile) must be in (0, 100], got {alpha}")
    if not 0 <= theta <= 1:
        raise ConfigError(f"theta must be in [0, 1] (errors are normalized to [0, 1]), got {theta}")


def normalize_unit(d: np.ndarray) -> np.ndarray:
    """Min-max scale ``d`` to [0, 1] (Eq. 2's Normalize); constant input gives zeros."""
    d = np.asarray(d, np.float64)
    span = d.max() - d.min()
    return np.zeros_like(d) if span <= 0 else (d - d.min()) / span


def one_way_score(own_errors: np.ndarray, external_errors: np.ndarray, alpha: float) -> float:
    """Q_alpha(Normalize(|E_own - E_external|)) on one cluster's samples (Eq. 2 + step 3)."""
    if len(own_errors) == 0:  # empty clusters are dropped before the exchange
        raise ValueError("one_way_score needs the errors of at least one sample")
    return float(np.percentile(normalize_unit(np.abs(own_errors - external_errors)), alpha))


def association_edges(
    errors: np.ndarray,
    members: Sequence[np.ndarray],
    owners: Sequence[int],
    alpha: float,
    theta: float,
) -> list[tuple[int, int]]:
    """All associated cluster pairs (a, b), a < b, of different owners.

    Parameters
    ----------
    errors : [clusters, samples] per-sample reconstruction error of cluster a's model on
        every sample of the system (row a is what each client computes locally with a's model).
    members : the sample indices of each cluster.
    owners : the client owning each cluster.
    """
    check_thresholds(alpha, theta)
    n = len(members)
    # score[a, b]: Q_alpha on a's samples of the error difference between a's and b's model
    score = np.full((n, n), np.inf)
    for a in range(n):
        own = errors[a, members[a]]
        for b in range(n):
            if owners[a] != owners[b]:
                score[a, b] = one_way_score(own, errors[b, members[a]], alpha)
    both = (score <= theta) & (score.T <= theta)
    return [(a, b) for a in range(n) for b in range(a + 1, n) if both[a, b]]
