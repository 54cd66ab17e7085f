"""Client-side cluster refinement (FedCRef, Algorithm 2)."""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from fedprune.errors import ConfigError


def refine(errors: np.ndarray, num_clusters: int) -> np.ndarray:
    """New local clusters from the errors of the candidate models on the client's samples.

    ``errors`` is [models, samples]: the client's own cluster models and the received
    community models (Alg. 2 line 4). ``num_clusters`` times (lines 6-14): every still
    unassigned sample votes for its lowest-error model among those not yet selected; the model
    with most votes forms the next cluster with its voters and leaves the candidates. Left-over
    samples (line 15-17) join the selected model with their lowest error. Returns the cluster
    index (0..num_clusters-1, in order of formation) of every sample.

    When every sample is assigned before ``num_clusters`` clusters are formed (one model won
    every vote, or there are fewer candidate models), the remaining clusters stay empty, as
    lines 6-14 imply (H_p is formed from the votes of the empty R); such a cluster is dropped
    until a later refinement fills it (:func:`.algorithm.drop_empty_clusters`).
    Ties in the vote go to the model listed first (own models come first).
    """
    errors = np.asarray(errors)
    n_models, n_samples = errors.shape
    if num_clusters < 1:
        raise ConfigError(f"a client needs at least one cluster, got {num_clusters}")
    if n_models < 1:
        raise ConfigError("refinement needs at least one candidate model")
    assignment = np.full(n_samples, -1, dtype=np.int64)
    candidates = list(range(n_models))
    selected: list[int] = []
    for p in range(min(num_clusters, n_models)):
        remaining = np.flatnonzero(assignment < 0)
        if len(remaining) == 0:
            break
        best = np.asarray(candidates)[np.argmin(errors[np.ix_(candidates, remaining)], axis=0)]
        votes = np.bincount(best, minlength=n_models)
        winner = int(np.argmax(votes))
        assignment[remaining[best == winner]] = p
        selected.append(winner)
        candidates.remove(winner)
    left = np.flatnonzero(assignment < 0)
    if len(left):
        assignment[left] = np.argmin(errors[np.ix_(selected, left)], axis=0)
    return assignment


def align_labels(previous: np.ndarray, new: np.ndarray, num_clusters: int) -> np.ndarray:
    """``new`` with its cluster ids permuted to agree best with ``previous`` (Hungarian).

    Algorithm 2 numbers clusters in order of formation, so without this a cluster's id could
    change between iterations while its samples barely do; a stabilized client keeps the
    models of its last training round (Phase 5), which must still describe the cluster with
    the same id. (Our bookkeeping choice; the paper does not discuss ids.)
    """
    size = max(num_clusters, int(new.max(initial=-1)) + 1, int(previous.max(initial=-1)) + 1)
    overlap = np.zeros((size, size), dtype=np.int64)
    np.add.at(overlap, (new, previous), 1)
    rows, cols = linear_sum_assignment(-overlap)
    mapping = np.empty(size, dtype=np.int64)
    mapping[rows] = cols
    return mapping[new]
