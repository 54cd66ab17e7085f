"""Multi-round federated k-means with TFF's ``tff.learning.algorithms.build_fed_kmeans``: the
iterative baseline beside the one-shot methods (``fedprune train fedkmeans``).

Every round the server broadcasts the ``k*`` centroids, each client assigns its objects to
the nearest one and sends back per-centroid sums and counts, and the server moves the
centroids (TFF's mini-batch k-means update with a pseudo-count of 1, where the "mini-batch"
is every client's data). After the last round each client labels its objects by their
nearest centroid, locally.

Readings (TFF's process fixes the rest):

* TFF draws the initial centroids from its own random initialisation, seeded by
  ``random_seed``; we pass two integers drawn from ``SeedSequence(seed)``, so the same seed
  gives the same labels. A centroid that no object is nearest to never moves (TFF's update
  is mini-batch k-means without re-seeding), so a run can end with fewer than ``k*``
  clusters in use; ``clusters_found`` in the summary says so.
* Every client takes part in every round (the UCI tables have 8 clients); ``rounds``
  (default 20) is not from the paper, which does not run this baseline.
* Bytes, 4 per value, per round and client: down ``k* d`` (the centroids), up ``k* d + k*``
  (the sums and the counts).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from fedprune.algorithms.fedhire.algorithm import check_client_data
from fedprune.algorithms.fedhire.baselines import BaselineResult
from fedprune.checks import check_count, check_seed
from fedprune.engine.rounds import call_interruptibly
from fedprune.errors import ConfigError


def nearest_centroid(x: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Each row's nearest centroid (squared Euclidean distance; ties to the lower index)."""
    sq = (x * x).sum(1)[:, None] - 2.0 * x @ centroids.T + (centroids * centroids).sum(1)
    return np.argmin(sq, axis=1).astype(np.int64)


def fed_kmeans(
    client_data: list[np.ndarray], k_star: int, seed: int, rounds: int = 20
) -> BaselineResult:
    """``rounds`` rounds of TFF's federated k-means on ``client_data``; labels per client."""
    check_seed(seed)
    check_count("k_star", k_star)
    check_count("rounds", rounds)
    data = check_client_data(client_data)
    total = sum(x.shape[0] for x in data)
    if k_star > total:
        raise ConfigError(f"--k-star must be at most {total} (the objects), got {k_star}")
    d = data[0].shape[1]
    state_seed = np.random.SeedSequence(seed).generate_state(2) >> 1
    process = tff.learning.algorithms.build_fed_kmeans(
        k_star, (d,), random_seed=(int(state_seed[0]), int(state_seed[1]))
    )
    datasets = [tf.data.Dataset.from_tensor_slices(x.astype(np.float32)) for x in data]
    state = call_interruptibly(process.initialize)
    for _ in range(rounds):
        state = call_interruptibly(lambda s=state: process.next(s, datasets)).state
    centroids = np.asarray(call_interruptibly(lambda: process.get_model_weights(state)))
    centroids = centroids.reshape(k_star, d).astype(np.float64)
    labels = [nearest_centroid(x, centroids) for x in data]
    clients = len(data)
    return BaselineResult(
        labels,
        bytes_uploaded=4 * rounds * clients * (k_star * d + k_star),
        bytes_downloaded=4 * rounds * clients * k_star * d,
        centres=[centroids] * clients,
        centre_clusters=[np.arange(k_star, dtype=np.int64)] * clients,
    )
