"""The CFL baselines of the AS-CFL paper (Section 4.1): Sattler, Müller and Samek's recursive
bipartition ("Clustered Federated Learning: Model-Agnostic Distributed Multi-Task
Optimization under Privacy Constraints", IEEE TNNLS 2021), and CFL with a fixed number of
clusters ("the CFL approach, which uses cosine similarity for clustering with a fixed number
of clusters").

How each step is read:

* Split criterion (Sattler et al., Algorithm 1 and Section on the stopping criterion): a
  cluster has reached a stationary point of the joint objective when the *mean* update is
  small, ``||sum_i (n_i / n) Δθ_i|| < ε1``, while some client is still far from its own
  optimum, ``max_i ||Δθ_i|| > ε2``; only then is it split. The mean update norm is the norm of
  the data-size weighted mean update (equal weights without ``data_sizes``), not a mean of
  norms (:func:`split_criterion`).
* Bipartition (Sattler et al.): ``c1, c2 = argmin max_{i in c1, j in c2} cos(Δθ_i, Δθ_j)``.
  The minimum of the largest cross similarity is the largest "spacing" of a two-clustering
  under the distance ``1 - cos``, which single-linkage agglomeration finds exactly (the
  classic max-spacing property of single linkage); ``linkage="single"`` is therefore the
  default. ``linkage="complete"`` is what Sattler et al.'s public reference code runs; it is a
  heuristic for the same objective and can return a bipartition with a larger cross
  similarity (the tests show one) (:func:`optimal_bipartition`).
* Fixed K: spherical k-means on the unit update directions (cosine similarity to unit
  centroids), k-means++ seeding on the cosine distance, ``n_init`` seeded restarts keeping the
  largest total similarity to the assigned centroid (:func:`fixed_k_clusters`).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np
from sklearn.cluster import AgglomerativeClustering

from fedprune import checks
from fedprune.algorithms.ascfl._arrays import (
    ClientIds,
    check_nonzero,
    label_array,
    similarity_matrix,
    update_matrix,
    weights_from_sizes,
)
from fedprune.algorithms.ascfl.similarity import cosine_similarity_matrix
from fedprune.errors import ConfigError

Linkage = Literal["single", "complete"]
LINKAGES: tuple[str, ...] = ("single", "complete")


@dataclasses.dataclass(frozen=True)
class SplitCriterion:
    """Sattler et al.'s test on one cluster: ``split`` when ``mean_update_norm < eps1`` and
    ``max_update_norm > eps2`` (and the cluster has at least ``min_size`` clients)."""

    split: bool
    mean_update_norm: float
    max_update_norm: float


def split_criterion(
    updates: object,
    data_sizes: object = None,
    *,
    eps1: float,
    eps2: float,
    min_size: int = 2,
    client_ids: ClientIds = None,
) -> SplitCriterion:
    """Sattler et al.'s criterion for splitting one cluster (see the module docstring).

    ``min_size`` (>= 2, the smallest cluster a bipartition can split) lets a caller hold small
    clusters together.

    >>> c = split_criterion([[3.0, 0.0], [-3.0, 0.2]], eps1=0.5, eps2=2.0)
    >>> c.split, round(c.mean_update_norm, 6), round(c.max_update_norm, 6)
    (True, 0.1, 3.006659)
    """
    checks.check_positive("cfl_eps1", eps1)
    checks.check_positive("cfl_eps2", eps2)
    checks.check_count("cfl_min_size", min_size, 2)
    x = update_matrix(updates, client_ids)
    p = weights_from_sizes(data_sizes, len(x))
    mean_norm = float(np.linalg.norm(p @ x))
    max_norm = float(np.linalg.norm(x, axis=1).max())
    split = len(x) >= min_size and mean_norm < eps1 and max_norm > eps2
    return SplitCriterion(split, mean_norm, max_norm)


def optimal_bipartition(
    similarity: object, linkage: Linkage = "single"
) -> tuple[np.ndarray, np.ndarray]:
    """Sattler et al.'s bipartition minimizing the largest cross-cluster cosine similarity,
    by agglomerative clustering into two clusters on the distance ``1 - S``.

    Returns two sorted index arrays; the first holds client 0.
    """
    checks.check_choice("cfl_linkage", linkage, LINKAGES)
    s = similarity_matrix(similarity)
    n = len(s)
    if n < 2:
        raise ConfigError(f"a bipartition needs at least 2 clients, got {n}")
    if n == 2:
        return np.array([0]), np.array([1])
    distance = np.clip(1.0 - s, 0.0, 2.0)
    np.fill_diagonal(distance, 0.0)
    labels = AgglomerativeClustering(
        n_clusters=2, metric="precomputed", linkage=linkage
    ).fit_predict(distance)
    first = labels == labels[0]
    return np.flatnonzero(first), np.flatnonzero(~first)


def max_cross_similarity(similarity: object, first: object, second: object) -> float:
    """``max_{i in first, j in second} S_ij``: the quantity the bipartition minimizes."""
    s = similarity_matrix(similarity)
    a = np.asarray(first, dtype=np.int64)
    b = np.asarray(second, dtype=np.int64)
    if a.size == 0 or b.size == 0 or np.intersect1d(a, b).size:
        raise ConfigError("first and second must be non-empty, disjoint sets of clients")
    return float(s[np.ix_(a, b)].max())


@dataclasses.dataclass(frozen=True)
class CflSplit:
    """Result of :func:`cfl_split`: ``parts`` (indices into the cluster's clients) and their
    ``cross_similarity`` when the criterion says split, else ``None``."""

    criterion: SplitCriterion
    parts: tuple[np.ndarray, np.ndarray] | None
    cross_similarity: float | None


def cfl_split(
    updates: object,
    data_sizes: object = None,
    *,
    eps1: float,
    eps2: float,
    min_size: int = 2,
    linkage: Linkage = "single",
    client_ids: ClientIds = None,
) -> CflSplit:
    """One step of Sattler et al.'s recursion on one cluster: test the criterion, and if it
    holds bipartition the cluster by the cosine similarity of its clients' updates."""
    checks.check_choice("cfl_linkage", linkage, LINKAGES)
    criterion = split_criterion(
        updates, data_sizes, eps1=eps1, eps2=eps2, min_size=min_size, client_ids=client_ids
    )
    if not criterion.split:
        return CflSplit(criterion, None, None)
    s = cosine_similarity_matrix(updates, client_ids)
    first, second = optimal_bipartition(s, linkage)
    return CflSplit(criterion, (first, second), max_cross_similarity(s, first, second))


def fixed_k_clusters(
    updates: object,
    k: int,
    *,
    seed: int,
    n_init: int = 10,
    max_iter: int = 100,
    client_ids: ClientIds = None,
) -> np.ndarray:
    """CFL with a fixed number of clusters (AS-CFL Section 4.1 baseline): spherical k-means
    of the update directions; labels 0..K-1 numbered by first appearance."""
    checks.check_count("clusters", k)
    checks.check_seed(seed)
    checks.check_count("n_init", n_init)
    checks.check_count("max_iter", max_iter)
    x = update_matrix(updates, client_ids)
    check_nonzero(x, client_ids)
    n = len(x)
    checks.check_at_most("clusters", k, n, "the number of clients")
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    rng = np.random.default_rng(seed)
    best, best_score = None, -np.inf
    for _ in range(n_init):
        labels, score = _spherical_kmeans(unit, k, rng, max_iter)
        if score > best_score + 1e-12:
            best, best_score = labels, score
    return label_array(best, n)


def _spherical_kmeans(
    unit: np.ndarray, k: int, rng: np.random.Generator, max_iter: int
) -> tuple[np.ndarray, float]:
    n = len(unit)
    chosen = [int(rng.integers(n))]
    while len(chosen) < k:
        gap = np.clip(1.0 - (unit @ unit[chosen].T).max(axis=1), 0.0, None)
        gap[chosen] = 0.0
        if gap.sum() > 0:
            chosen.append(int(rng.choice(n, p=gap / gap.sum())))
        else:  # the rest duplicate a centre's direction: any unchosen client
            chosen.append(int(rng.choice(np.setdiff1d(np.arange(n), chosen))))
    centres = unit[chosen]
    labels = np.full(n, -1)
    for _ in range(max_iter):
        sims = unit @ centres.T
        new = np.argmax(sims, axis=1)
        for c in range(k):  # refill an empty cluster with the worst-fitting movable client
            if not (new == c).any():
                counts = np.bincount(new, minlength=k)
                fit = sims[np.arange(n), new].copy()
                fit[counts[new] < 2] = np.inf
                new[int(np.argmin(fit))] = c
        if np.array_equal(new, labels):
            break
        labels = new
        sums = np.stack([unit[labels == c].sum(axis=0) for c in range(k)])
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        centres = np.where(norms > 0, sums / np.where(norms > 0, norms, 1.0), centres)
    score = float((unit @ centres.T)[np.arange(n), labels].sum())
    return labels, score
