"""Client clustering of CA-AFP (Section 3.1): cosine distance of one-epoch updates (Eq. 4),
agglomerative clustering with average linkage (scikit-learn).

The same functions cluster any per-client signal given as rows (``--cluster-signal labels``
clusters label histograms, :mod:`fedprune.algorithms.caafp.label_histograms`);
:mod:`fedprune.algorithms.caafp.choose_k` picks K from the same distances.
"""

from __future__ import annotations

import numpy as np
from sklearn.cluster import AgglomerativeClustering
from sklearn.metrics.pairwise import cosine_distances

from fedprune.errors import ConfigError


def cosine_distance_matrix(updates: np.ndarray) -> np.ndarray:
    """Eq. 4: d(k, k') = 1 - <Δw_k, Δw_k'> / (||Δw_k|| ||Δw_k'||), for rows of ``updates``."""
    if np.any(np.linalg.norm(updates, axis=1) == 0):
        raise ValueError("a client's update is all zeros; its direction is undefined")
    d = cosine_distances(updates)
    np.fill_diagonal(d, 0.0)
    return np.clip(d, 0.0, 2.0)


def cluster_distances(distances: np.ndarray, n_clusters: int) -> np.ndarray:
    """Cluster labels 0..K-1 (numbered by each cluster's first client) of the average-linkage
    cut into ``n_clusters`` of the (N, N) distance matrix ``distances``."""
    n = len(distances)
    if not 1 <= n_clusters <= n:
        raise ConfigError(
            f"clusters K must be in [1, {n}] (the number of clients), got {n_clusters}"
        )
    if n_clusters == 1:
        return np.zeros(n, dtype=np.int64)
    labels = AgglomerativeClustering(
        n_clusters=n_clusters, metric="precomputed", linkage="average"
    ).fit_predict(distances)
    # renumber by first appearance so the numbering does not depend on sklearn internals
    order = {label: i for i, label in enumerate(dict.fromkeys(labels.tolist()))}
    return np.array([order[label] for label in labels], dtype=np.int64)


def cluster_clients(updates: np.ndarray, n_clusters: int) -> np.ndarray:
    """Cluster labels 0..K-1 (numbered by each cluster's first client) from client updates:
    :func:`cluster_distances` of their :func:`cosine_distance_matrix` (not computed, nor its
    directions needed, when there is nothing to cut: K = 1 or a K the check refuses)."""
    n = len(updates)
    cut = 1 < n_clusters <= n
    return cluster_distances(
        cosine_distance_matrix(updates) if cut else np.zeros((n, n)), n_clusters
    )
