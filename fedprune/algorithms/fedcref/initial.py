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
"""

from __future__ import annotations

import numpy as np
from sklearn.cluster import KMeans

from fedprune.algorithms.fedcref.local_models import LocalTrainer


def kmeans_on_embeddings(x: np.ndarray, k: int, trainer: LocalTrainer, seed: int) -> np.ndarray:
    """Cluster ``x`` into ``k`` groups by k-means on the codes of an autoencoder fit to ``x``."""
    weights = trainer.fit(x, seed)
    codes = trainer.encode(weights, x)
    return KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(codes).astype(np.int64)
