"""The server side of one round of AS-CFL (Algorithm 1 lines 12-37) and of the baselines the
paper compares it with (CFL, CFL with a fixed K, IFCA, FedAvg), on the per-client updates of
:mod:`fedprune.engine.per_client`.

Every method keeps a list of cluster models and each client's cluster. A round: the clients
train E local epochs of SGD from their cluster's model at the learning rate 0.1 · 0.99^(t-1)
(§4.1; Algorithm 1 lines 4-10) and return Δw; the server then re-forms the clusters by the
method's rule and aggregates within each new cluster. Interpretations, beyond those of the
package (``fedprune/algorithms/ascfl/__init__.py``):

* **Re-clustering when members trained from different models.** AS-CFL re-clusters every
  round (Algorithm 1 line 16 sits inside the round loop), so a new cluster may gather clients
  that trained from different cluster models. Its model is the data-size weighted average of
  the members' *local models* w_start(i) + Δw_i, the noise (if any) added to the average
  update (``aggregate_cluster``). For members that started from one model this is exactly
  §3.4's rule w_c + Σ p_i Δw_i. With noise on, the average update is TFF's DP aggregator's
  clipped, noised, *unweighted* mean (:mod:`.dp_aggregator`).
* **The proxy evaluation** of §3.2.1 ("a single weighted average, eliminating the need for
  retraining"): the weighted average of the candidate members' local models, accuracy on the
  server's proxy set; memoized per member set within a round.
* **w/o positive incentive** (§4.3: "clients are assigned solely based on similarity
  without performance validation"): the same greedy growth over the top-20 % most similar
  candidates, every candidate admitted (a stand-in "accuracy" that grows with each member
  and a zero gain).
* **w/o dynamic adjustment**: no EM and no split/merge (the incentive's clusters are final).
* **Which vectors EM and G_k see**: the full flattened updates, or the low-rank coefficients
  when the low-rank similarity is on (the space the similarity was computed in); as they are
  (``--em-space raw``, default: §3.3's Euclidean distance) or divided by their norms
  (``unit``). Raw updates grow with a client's number of SGD steps, so raw Euclidean EM can
  regroup clients by data size: on one round of real updates (MNIST, IID labels;
  ``experiments/ascfl_admission_probe.py``) the incentive's four exact rotation groups
  (ARI 1.0) came out of raw EM at ARI 0.05 in round 1.
* **Which update the similarity compares** (``--update-reference``). Algorithm 1 line 9's
  Δw_i is the client's change from the model it received (``start``, default). After a round
  with several clusters, clients that trained from different cluster models return changes
  from different points: their cosine then says how alike their last steps were, not how
  alike the models they reach are, and late in training those steps are mostly SGD noise
  (measured: the rotation groups' G_k rises from 0.5 in round 1 to ~1 by round 15 on
  rotation-only MNIST). ``common`` measures every client's change from one shared point, the
  data-size weighted mean of the models the reporting clients received (w_start(i) + Δw_i −
  w̄): clients of one cluster share its offset from w̄. With a single cluster both are the
  same. The incentive, EM and G_k all see these vectors; the aggregation still averages the
  clients' own Δw.
* **When Stage 1 runs** (``--stage1``). Algorithm 1 puts Stage 1 (line 16, "Perform
  initial greedy clustering ... to form initial clusters") inside the round loop
  (``every_round``, default). Its name, §3.2's title ("Initial Clustering with Adaptive
  Similarity") and "Thus, the initial K is data-driven" (§3.2.2) also read as clusters
  formed *once* and then adjusted: ``first_round`` runs the incentive in round 1 only; in
  every later round Stage 2 (EM, then split/merge) starts from the previous round's clusters,
  on that round's updates. Clients that did not report before start in the cluster they were
  given (cluster 0 in round 1).
* **CFL** (Sattler et al.): one cluster at the start; in every round each cluster with at
  least ``min_size`` members is split in two (optimal bipartition of the cosine similarity)
  when its weighted mean update norm is below ε1 and its largest update norm above ε2.
  **CFL with a fixed K** (the AS-CFL paper's baseline reading): every round, spherical
  k-means with K clusters on the updates. **IFCA**: K models; each client trains the one
  with the lowest loss on its training data; a model is the weighted average of its
  choosers' local models (model averaging). **FedAvg**: one model.
* **Client dropout** (§4.2.3, "10% random dropout per round"): a seeded fraction of the
  clients does not report in a round; it keeps its cluster and is evaluated with its
  cluster's new model.
* **Late clients** (``--late-clients``; the paper is silent: under Algorithm 1 every round
  re-forms the clusters). With clusters formed once (``--stage1 first_round``), a client
  absent from that round has no update to be clustered by; it is first put where the
  members of its old (warm-up) cluster went, and Stage 2 starts from the labels the
  clients trained in, so it would stay there for good (measured in stop 35: with 10 %
  dropout, 1-2 clients per seed in another rotation's cluster, ARI 0.72-0.86 to the end).
  ``lowest_loss`` (default): when it next reports, it receives every cluster's model once
  and joins the one with the lowest loss on its training data (the rule IFCA's clients
  choose by), then trains that model; the downlink counts the extra models. ``follow``:
  it stays (before stop 35).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from fedprune.algorithms.ascfl import (
    cfl,
    dp_aggregator,
    incentive,
    noisy_aggregation,
    similarity,
    split_merge,
)
from fedprune.algorithms.ascfl._arrays import update_matrix
from fedprune.engine.per_client import ClientUpdates

Weights = list[np.ndarray]
METHODS = ("ascfl", "cfl", "cfl-fixed", "ifca", "fedavg")


@dataclasses.dataclass(frozen=True)
class ServerSettings:
    """What the server does; defaults are the paper's (§3, §4.1) and the package's readings."""

    method: str = "ascfl"
    incentive: bool = True
    adjustment: bool = True
    low_rank: bool = True
    explained_variance: float = 0.95
    low_rank_tensors: int = 2  # trailing weight tensors factorized: the output kernel and bias
    admission: str = "absolute_gain"
    gain: float = 0.03
    theta: float = 0.85
    split_threshold: float = 0.8
    merge_threshold: float = 0.2
    unit_vectors: bool = False  # EM and G_k on update directions (split_merge ``normalize``)
    singletons: str = "keep"  # split_merge's policy for single-client clusters
    split_guard: str = "none"  # split_merge's guard: "halves" splits only into settled halves
    update_reference: str = "start"  # AS-CFL's similarity: Δw from each client's start or "common"
    merge_guard: str = "settled"  # split_merge's: the union's G <= β, or "compact" (<= α)
    stage1: str = "every_round"  # AS-CFL's incentive clustering: every round or "first_round"
    clip_norm: float | None = None
    noise_multiplier: float = 0.0
    clusters: int = 4  # K of cfl-fixed and ifca
    eps1: float = 0.4  # CFL: mean update norm below this ...
    eps2: float = 1.6  # ... and the largest above this: split
    min_size: int = 2


def average(models: Sequence[Weights], weights: np.ndarray) -> Weights:
    """The weighted average of models (weights need not be normalized)."""
    p = np.asarray(weights, dtype=np.float64) / float(np.sum(weights))
    return [
        np.tensordot(p, np.stack([m[i] for m in models]), axes=1).astype(np.float32)
        for i in range(len(models[0]))
    ]


def flatten(update: Weights) -> np.ndarray:
    return np.concatenate([np.ravel(u) for u in update]).astype(np.float64)


@dataclasses.dataclass
class Regrouped:
    """The server's result of a round: the new cluster models and each reporting client's
    cluster (index into ``models``), with what the round's clustering found."""

    models: list[Weights]
    cluster_of: dict[int, int]
    rank: int | None = None
    splits: tuple = ()
    incentive_clusters: int | None = None  # AS-CFL: clusters Stage 1 formed
    adjustment: split_merge.Adjustment | None = None  # AS-CFL: Stage 2's pass (G_k and all)


def _local_models(
    models: Sequence[Weights], cluster_of: dict[int, int], got: ClientUpdates
) -> list[Weights]:
    return [
        [s + u for s, u in zip(models[cluster_of[cid]], update)]
        for cid, update in zip(got.client_ids, got.updates)
    ]


def _aggregate(
    labels: np.ndarray,
    starts: Sequence[Weights],
    got: ClientUpdates,
    settings: ServerSettings,
    rng: np.random.Generator,
) -> list[Weights]:
    """Per cluster label (in increasing order): weighted average of the members' start models
    plus the (clipped, noisy) weighted average of their updates."""
    out = []
    for k in sorted(set(labels.tolist())):
        members = np.flatnonzero(labels == k)
        sizes = got.examples[members].astype(np.float64)
        start = average([starts[i] for i in members], sizes)
        flat = np.stack([flatten(got.updates[i]) for i in members])
        ids = [got.client_ids[i] for i in members]
        if settings.noise_multiplier > 0:  # TFF's DP aggregator (equal weights, see there)
            update_matrix(flat, ids)  # a non-finite update: one line naming the client
            agg = dp_aggregator.dp_mean(flat, settings.clip_norm, settings.noise_multiplier)
        else:
            agg = noisy_aggregation.aggregate_cluster(
                flat, sizes, clip_norm=settings.clip_norm, rng=rng, client_ids=ids
            ).update
        pieces, offset = [], 0
        for s in start:
            pieces.append((s + agg[offset : offset + s.size].reshape(s.shape)).astype(np.float32))
            offset += s.size
        out.append(pieces)
    return out


def regroup(
    models: Sequence[Weights],
    cluster_of: dict[int, int],
    got: ClientUpdates,
    settings: ServerSettings,
    evaluate: Callable[[Weights], float],
    rng: np.random.Generator,
    previous_splits: tuple = (),
    first_round: bool = True,
) -> Regrouped:
    """Form this round's clusters from the updates and aggregate (see the module text).
    ``evaluate(model)`` is the proxy accuracy of a model (AS-CFL's incentive only);
    ``first_round`` says whether AS-CFL's Stage 1 runs under ``stage1="first_round"``."""
    starts = [models[cluster_of[cid]] for cid in got.client_ids]
    sizes = got.examples.astype(np.float64)
    flat = np.stack([flatten(u) for u in got.updates])
    rank, splits, grown, adjusted = None, (), None, None
    if settings.method == "fedavg":
        labels = np.zeros(len(flat), dtype=np.int64)
    elif settings.method == "ifca":  # the clients chose their model before training
        labels = np.array([cluster_of[cid] for cid in got.client_ids], dtype=np.int64)
    elif settings.method == "cfl-fixed":
        k = min(settings.clusters, len(flat))
        labels = np.asarray(
            cfl.fixed_k_clusters(flat, k, seed=int(rng.integers(2**31 - 1))), dtype=np.int64
        )
    elif settings.method == "cfl":
        labels = _cfl_labels(flat, sizes, cluster_of, got, settings)
    else:
        compared = got.updates
        if settings.update_reference == "common":
            compared = _from_common_point(starts, got)
        rank, sim, points = _similarity_space(compared, got.client_ids, settings)
        if settings.stage1 == "every_round" or first_round:
            labels = _incentive_labels(sim, sizes, starts, got, settings, evaluate)
            grown = len(set(labels.tolist()))
        else:  # Stage 2 refines the clusters the clients trained in
            labels = np.array([cluster_of[cid] for cid in got.client_ids], dtype=np.int64)
        if settings.adjustment and len(set(labels.tolist())) >= 1 and len(flat) > 1:
            _, adjusted = split_merge.dynamic_adjustment(
                points,
                labels,
                sizes,
                split_threshold=settings.split_threshold,
                merge_threshold=settings.merge_threshold,
                previous_splits=previous_splits,
                normalize=settings.unit_vectors,
                singletons=settings.singletons,
                split_guard=settings.split_guard,
                merge_guard=settings.merge_guard,
            )
            labels, splits = np.asarray(adjusted.labels, dtype=np.int64), tuple(adjusted.splits)
    new_models = _aggregate(labels, starts, got, settings, rng)
    order = {k: i for i, k in enumerate(sorted(set(labels.tolist())))}
    if settings.method == "ifca":  # IFCA keeps K models: a model nobody chose stays as it was
        kept = [list(m) for m in models]
        for k, model in zip(sorted(order), new_models):
            kept[k] = model
        return Regrouped(kept, {cid: int(k) for cid, k in zip(got.client_ids, labels)})
    return Regrouped(
        new_models,
        {cid: order[int(k)] for cid, k in zip(got.client_ids, labels)},
        rank,
        splits,
        grown,
        adjusted,
    )


def _from_common_point(starts: Sequence[Weights], got: ClientUpdates) -> list[Weights]:
    """Every client's local model minus the data-size weighted mean of the start models
    (``--update-reference common``; the module text)."""
    common = average(starts, got.examples.astype(np.float64))
    return [
        [s + u - c for s, u, c in zip(start, update, common)]
        for start, update in zip(starts, got.updates)
    ]


def _cfl_labels(
    flat: np.ndarray,
    sizes: np.ndarray,
    cluster_of: dict[int, int],
    got: ClientUpdates,
    settings: ServerSettings,
) -> np.ndarray:
    current = np.array([cluster_of[cid] for cid in got.client_ids], dtype=np.int64)
    labels, next_label = current.copy(), int(current.max()) + 1
    for k in sorted(set(current.tolist())):
        members = np.flatnonzero(current == k)
        if len(members) < settings.min_size:
            continue
        result = cfl.cfl_split(
            flat[members],
            sizes[members],
            eps1=settings.eps1,
            eps2=settings.eps2,
            min_size=settings.min_size,
            client_ids=[got.client_ids[i] for i in members],
        )
        if result.parts is not None:
            labels[members[np.asarray(result.parts[1])]] = next_label
            next_label += 1
    return labels


def _similarity_space(
    compared: Sequence[Weights], ids: Sequence[int], settings: ServerSettings
) -> tuple[int | None, np.ndarray, np.ndarray]:
    """The rank (low-rank only), the similarity matrix of §3.2 and the vectors EM and G_k
    see, from the vectors ``compared`` (the clients' Δw, or their changes from a common
    point)."""
    ids = list(ids)
    if settings.low_rank:
        tail = -settings.low_rank_tensors
        output = np.stack([np.concatenate([np.ravel(u) for u in up[tail:]]) for up in compared])
        low = similarity.low_rank_similarity(output, settings.explained_variance, ids)
        return low.rank, low.similarity, np.asarray(low.coefficients)
    flat = np.stack([flatten(u) for u in compared])
    return None, similarity.cosine_similarity_matrix(flat, ids), flat


def _incentive_labels(
    sim: np.ndarray,
    sizes: np.ndarray,
    starts: Sequence[Weights],
    got: ClientUpdates,
    settings: ServerSettings,
    evaluate: Callable[[Weights], float],
) -> np.ndarray:
    """Stage 1 on the similarity ``sim``; the proxy evaluation averages the clients' real
    local models (start + Δw)."""
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
        proxy_accuracy if settings.incentive else similarity_only,
        rule=settings.admission if settings.incentive else "absolute_gain",
        gain=settings.gain if settings.incentive else 0.0,
        theta=settings.theta,
    )
    return np.asarray(grouped.labels, dtype=np.int64)
