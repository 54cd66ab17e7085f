"""Baselines for Fed-HIRE's tables: k-FED (Dennis et al., 2021, one-shot federated k-means),
pooled k-means, and the Table 4 ablations (flags of :func:`.algorithm.fed_hire`:
``client_method="kmeans"`` and / or ``server_method="kmeans"``).

* k-FED -- each client runs k-means with ``k'`` centres (default ``k*``, capped at the client's
  size), uploads them once; the server runs k-means of all centres into ``k*``; an object's
  label is the server cluster of its nearest local centre (the "nearest centre chain").
  Upload ``4 d Σ k'`` bytes, download ``4 Σ k'``.
* Pooled k-means -- :class:`sklearn.cluster.KMeans` on every client's objects together (not
  federated; the reference point).
Both use ``n_init=10`` and seeds from ``SeedSequence(seed)``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from sklearn.cluster import KMeans

from fedprune.algorithms.fedhire.algorithm import check_client_data
from fedprune.checks import check_count, check_seed
from fedprune.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class BaselineResult:
    """labels per client; bytes moved (0 for pooled k-means); ``centres`` per client, (k, d),
    and ``centre_clusters``, (k,), the cluster of each: an object's label is the cluster of
    its nearest centre (k-FED: the client's local centres; federated k-means: the global
    centroids, the same for every client); ``None`` for pooled k-means."""

    labels: list[np.ndarray]
    bytes_uploaded: int = 0
    bytes_downloaded: int = 0
    centres: list[np.ndarray] | None = None
    centre_clusters: list[np.ndarray] | None = None


def _seeds(seed: int, count: int) -> list[int]:
    return [int(s.generate_state(1)[0] >> 1) for s in np.random.SeedSequence(seed).spawn(count)]


def kfed(
    client_data: list[np.ndarray], k_star: int, seed: int, local_k: int | None = None
) -> BaselineResult:
    """One-shot federated k-means (k-FED)."""
    check_seed(seed)
    check_count("k_star", k_star)
    if local_k is not None:
        check_count("local_k", local_k)
    data = check_client_data(client_data)
    seeds = _seeds(seed, len(data) + 1)
    local = []
    for x, s in zip(data, seeds):
        km = KMeans(min(local_k or k_star, x.shape[0]), n_init=10, random_state=s).fit(x)
        local.append(km)
    centres = np.concatenate([km.cluster_centers_ for km in local])
    if k_star > centres.shape[0]:
        raise ConfigError(
            f"--k-star must be at most {centres.shape[0]} (the centres uploaded), got {k_star}"
        )
    server = KMeans(k_star, n_init=10, random_state=seeds[-1]).fit(centres).labels_
    labels, maps, start = [], [], 0
    for km in local:
        k = km.cluster_centers_.shape[0]
        maps.append(server[start : start + k].astype(np.int64))
        labels.append(maps[-1][km.labels_])
        start += k
    d = data[0].shape[1]
    return BaselineResult(
        labels,
        4 * d * centres.shape[0],
        4 * centres.shape[0],
        [km.cluster_centers_ for km in local],
        maps,
    )


def pooled_kmeans(client_data: list[np.ndarray], k_star: int, seed: int) -> BaselineResult:
    """k-means on all objects pooled (the non-federated reference)."""
    check_seed(seed)
    check_count("k_star", k_star)
    data = check_client_data(client_data)
    pooled = np.concatenate(data)
    if k_star > pooled.shape[0]:
        raise ConfigError(f"--k-star must be at most {pooled.shape[0]} (objects), got {k_star}")
    labels = KMeans(k_star, n_init=10, random_state=_seeds(seed, 1)[0]).fit(pooled).labels_
    bounds = np.cumsum([x.shape[0] for x in data])[:-1]
    return BaselineResult([lab.astype(np.int64) for lab in np.split(labels, bounds)])
