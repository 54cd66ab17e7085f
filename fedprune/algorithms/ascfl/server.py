"""The server's steps of a clustered round (AS-CFL's Algorithm 1 lines 12-37, and the
baselines' re-clustering), on the per-client updates of :mod:`fedprune.engine.per_client`:
pure functions that the rules of :mod:`.rules` compose.

Every method keeps a list of cluster models and each client's cluster. A round: the clients
train E local epochs of SGD from their cluster's model at the learning rate 0.1 · 0.99^(t-1)
(§4.1; Algorithm 1 lines 4-10) and return Δw; the server then re-forms the clusters by the
method's rule and aggregates within each new cluster (:func:`aggregate`). Interpretations,
beyond those of the package (``fedprune/algorithms/ascfl/__init__.py``) and of the rules
(:mod:`.rules`):

* **Re-clustering when members trained from different models.** AS-CFL re-clusters every
  round (Algorithm 1 line 16 sits inside the round loop), so a new cluster may gather clients
  that trained from different cluster models. Its model is the data-size weighted average of
  the members' *local models* w_start(i) + Δw_i, the noise (if any) added to the average
  update (``aggregate_cluster``). For members that started from one model this is exactly
  §3.4's rule w_c + Σ p_i Δw_i. With noise on, the average update is TFF's DP aggregator's
  clipped, noised, *unweighted* mean (:mod:`fedprune.privacy.dp_mean`).
* **The proxy evaluation** of §3.2.1 ("a single weighted average, eliminating the need for
  retraining"): the weighted average of the candidate members' local models, accuracy on the
  server's proxy set; memoized per member set within a round (:func:`incentive_labels`).
* **w/o positive incentive** (§4.3: "clients are assigned solely based on similarity
  without performance validation"): the same greedy growth over the top-20 % most similar
  candidates, every candidate admitted (a stand-in "accuracy" that grows with each member
  and a zero gain).
* **Which vectors EM and G_k see** (:func:`similarity_space`): the full flattened updates,
  or the low-rank coefficients when the low-rank similarity is on (the space the similarity
  was computed in); as they are (``--em-space raw``: §3.3's Euclidean distance) or divided
  by their norms (``unit``, default). Raw updates grow with a client's number of SGD steps,
  so raw Euclidean EM can regroup clients by data size: on one round of real updates
  (MNIST, IID labels; ``experiments/ascfl_admission_probe.py``) the incentive's four exact
  rotation groups (ARI 1.0) came out of raw EM at ARI 0.05 in round 1.
* **Which update the similarity compares** (``--update-reference``). Algorithm 1 line 9's
  Δw_i is the client's change from the model it received (``start``). After a round with
  several clusters, clients that trained from different cluster models return changes from
  different points: their cosine then says how alike their last steps were, not how alike
  the models they reach are, and late in training those steps are mostly SGD noise
  (measured: the rotation groups' G_k rises from 0.5 in round 1 to ~1 by round 15 on
  rotation-only MNIST). ``common`` (default) measures every client's change from one shared
  point, the data-size weighted mean of the models the reporting clients received
  (w_start(i) + Δw_i − w̄; :func:`from_common_point`): clients of one cluster share its
  offset from w̄. With a single cluster both are the same. The incentive, EM and G_k all see
  these vectors; the aggregation still averages the clients' own Δw.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from fedprune.algorithms.ascfl import (
    cfl,
    incentive,
    noisy_aggregation,
    similarity,
)
from fedprune.algorithms.ascfl._arrays import update_matrix
from fedprune.engine.per_client import ClientUpdates
from fedprune.privacy import dp_mean

Weights = list[np.ndarray]


def average(models: Sequence[Weights], weights: np.ndarray) -> Weights:
    """The weighted average of models (weights need not be normalized)."""
    p = np.asarray(weights, dtype=np.float64) / float(np.sum(weights))
    return [
        np.tensordot(p, np.stack([m[i] for m in models]), axes=1).astype(np.float32)
        for i in range(len(models[0]))
    ]


def flatten(update: Weights) -> np.ndarray:
    return np.concatenate([np.ravel(u) for u in update]).astype(np.float64)


def aggregate(
    labels: np.ndarray,
    starts: Sequence[Weights],
    got: ClientUpdates,
    clip_norm: float | None,
    noise_multiplier: float,
    rng: np.random.Generator,
) -> list[Weights]:
    """Per cluster label (in increasing order): weighted average of the members' start models
    plus the (clipped, noisy) weighted average of their updates (Algorithm 1 lines 25-36;
    the module text). ``starts[i]`` is the model client ``got.client_ids[i]`` trained from."""
    out = []
    for k in sorted(set(labels.tolist())):
        members = np.flatnonzero(labels == k)
        sizes = got.examples[members].astype(np.float64)
        start = average([starts[i] for i in members], sizes)
        flat = np.stack([flatten(got.updates[i]) for i in members])
        ids = [got.client_ids[i] for i in members]
        if noise_multiplier > 0:  # TFF's DP aggregator (equal weights, see there)
            update_matrix(flat, ids)  # a non-finite update: one line naming the client
            agg = dp_mean.dp_mean(flat, clip_norm, noise_multiplier)
        else:
            agg = noisy_aggregation.aggregate_cluster(
                flat, sizes, clip_norm=clip_norm, rng=rng, client_ids=ids
            ).update
        pieces, offset = [], 0
        for s in start:
            pieces.append((s + agg[offset : offset + s.size].reshape(s.shape)).astype(np.float32))
            offset += s.size
        out.append(pieces)
    return out


def from_common_point(starts: Sequence[Weights], got: ClientUpdates) -> list[Weights]:
    """Every client's local model minus the data-size weighted mean of the start models
    (``--update-reference common``; the module text)."""
    common = average(starts, got.examples.astype(np.float64))
    return [
        [s + u - c for s, u, c in zip(start, update, common)]
        for start, update in zip(starts, got.updates)
    ]


def cfl_labels(
    flat: np.ndarray,
    sizes: np.ndarray,
    current: np.ndarray,
    client_ids: Sequence[int],
    eps1: float,
    eps2: float,
    min_size: int,
) -> np.ndarray:
    """One pass of CFL's recursive bipartition (:func:`.cfl.cfl_split`): each cluster of the
    ``current`` labels with at least ``min_size`` members is split in two when Sattler et
    al.'s criterion holds; the second part gets a new label."""
    labels, next_label = current.copy(), int(current.max()) + 1
    for k in sorted(set(current.tolist())):
        members = np.flatnonzero(current == k)
        if len(members) < min_size:
            continue
        result = cfl.cfl_split(
            flat[members],
            sizes[members],
            eps1=eps1,
            eps2=eps2,
            min_size=min_size,
            client_ids=[client_ids[i] for i in members],
        )
        if result.parts is not None:
            labels[members[np.asarray(result.parts[1])]] = next_label
            next_label += 1
    return labels


def similarity_space(
    compared: Sequence[Weights],
    ids: Sequence[int],
    low_rank_tensors: int | None,
    explained_variance: float,
) -> tuple[int | None, np.ndarray, np.ndarray]:
    """The rank (low-rank only), the similarity matrix of §3.2 and the vectors EM and G_k
    see, from the vectors ``compared`` (the clients' Δw, or their changes from a common
    point). ``low_rank_tensors``: the trailing weight tensors the low-rank step factorizes
    (§3.2.2), keeping ``explained_variance`` of the energy; ``None``: the cosine of the full
    updates (w/o low-rank)."""
    ids = list(ids)
    if low_rank_tensors is not None:
        tail = -low_rank_tensors
        output = np.stack([np.concatenate([np.ravel(u) for u in up[tail:]]) for up in compared])
        low = similarity.low_rank_similarity(output, explained_variance, ids)
        return low.rank, low.similarity, np.asarray(low.coefficients)
    flat = np.stack([flatten(u) for u in compared])
    return None, similarity.cosine_similarity_matrix(flat, ids), flat


def incentive_labels(
    sim: np.ndarray,
    sizes: np.ndarray,
    starts: Sequence[Weights],
    got: ClientUpdates,
    evaluate: Callable[[Weights], float],
    *,
    positive_incentive: bool,
    admission: str,
    gain: float,
    theta: float,
) -> np.ndarray:
    """Stage 1 (Algorithm 1 line 16) on the similarity ``sim``; the proxy evaluation
    ``evaluate(model)`` averages the clients' real local models (start + Δw). Without the
    positive incentive every candidate is admitted (the module text)."""
    ids = list(got.client_ids)
    local = [[s + u for s, u in zip(start, up)] for start, up in zip(starts, got.updates)]
    cache: dict[tuple[int, ...], float] = {}

    def proxy_accuracy(members: tuple[int, ...]) -> float:
        key = tuple(sorted(members))
        if key not in cache:
            cache[key] = evaluate(average([local[i] for i in key], sizes[list(key)]))
        return cache[key]

    def similarity_only(members: tuple[int, ...]) -> float:
        # grows with every member, so with a zero gain every candidate is admitted
        return len(members) / len(ids)

    grouped = incentive.incentive_clustering(
        sim,
        sizes,
        proxy_accuracy if positive_incentive else similarity_only,
        rule=admission if positive_incentive else "absolute_gain",
        gain=gain if positive_incentive else 0.0,
        theta=theta,
    )
    return np.asarray(grouped.labels, dtype=np.int64)
