"""Initial local clusterings: simulated (dirty uniform) and a real unsupervised one.

The paper (Section 5.4) starts either from ``dirty uniform`` clusters (true categories with a
fraction ``dirtiness`` of samples moved, :func:`fedprune.data.clustered_partition.dirty_uniform`;
it uses labels because it *simulates* a clustering, never inside FedCRef) or from DEC run on
each client with K_i given. As the real initializer we use k-means on autoencoder embeddings:
the client trains the paper's autoencoder on all its samples and runs k-means (K_i clusters,
10 restarts) on the 32-d codes. This is DEC's first stage (an autoencoder, then k-means in its
latent space) without DEC's KL self-training refinement and with the FedCRef autoencoder
instead of DEC's d-500-500-2000-10 one: a documented simplification. With your own
autoencoder the codes are those of its narrowest inner layer
(:meth:`~fedprune.algorithms.fedcref.local_models.LocalTrainer.encode`).

The two stages are separate functions (:func:`embedding_codes`, :func:`kmeans_labels`) so that
``--local-k auto`` (:mod:`fedprune.algorithms.fedcref.local_k`) scores several K on one set of
codes and keeps, as the initial clustering, exactly what :func:`kmeans_on_embeddings` gives
for the K it chooses.
"""

from __future__ import annotations

import numpy as np
from sklearn.cluster import KMeans

from fedprune.algorithms.fedcref.local_models import LocalTrainer

KMEANS_RESTARTS = 10


def embedding_codes(x: np.ndarray, trainer: LocalTrainer, seed: int) -> np.ndarray:
    """The codes of ``x`` ([n, d]) under an autoencoder fit (seeded) to ``x`` itself."""
    return trainer.encode(trainer.fit(x, seed), x)


def kmeans_labels(codes: np.ndarray, k: int, seed: int) -> np.ndarray:
    """k-means of ``codes`` into ``k`` clusters (:data:`KMEANS_RESTARTS` restarts, seeded):
    one int64 label per row."""
    km = KMeans(n_clusters=k, n_init=KMEANS_RESTARTS, random_state=seed)
    return km.fit_predict(codes).astype(np.int64)


def kmeans_on_embeddings(x: np.ndarray, k: int, trainer: LocalTrainer, seed: int) -> np.ndarray:
    """Cluster ``x`` into ``k`` groups by k-means on the codes of an autoencoder fit to ``x``."""
    return kmeans_labels(embedding_codes(x, trainer, seed), k, seed)
