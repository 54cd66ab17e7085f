"""``--recluster split-merge``: AS-CFL's split/merge rule on the pipeline's clusters, so that
K can grow or shrink after the first assignment (Phases 2-3).

The rule itself is AS-CFL's (:func:`fedprune.algorithms.ascfl.split_merge.adjust_clusters`,
Section 3.3, Algorithm 1 lines 18-24): a cluster whose dispersion-to-separation ratio
``G_k = D_k / S_k`` exceeds the split threshold β is split in two (2-means seeded by its two
farthest members), one whose ``G_k`` is below the merge threshold α is merged with the cluster
of the nearest centroid. This module decides when it runs, on what, and what the new clusters'
models and masks are; the pass is :func:`fedprune.algorithms.pipeline.phases.recluster_step`.

Interpretations (CA-AFP is silent; AS-CFL's defaults unless said):

* **When**: before clustered round ``j`` (1-based over Phases 2-3) for ``j = N + 1, 2N + 1,
  ...`` (``--recluster-every N``), so that every change is followed by at least one round
  of training. The run's round of the pass is recorded (``reclusters.json``); the clusters
  it makes train from that round on. A pass that changes nothing is recorded too (its
  ``G_k`` show how close the rule came).
* **On what** (a fresh signal, not the rounds' updates): every client trains one local epoch
  from the same model, the *common model* (the sample-weighted mean of the cluster models,
  each client's cluster weighted by the client's training windows), and sends its update:
  CA-AFP's clustering signal (Eq. 3) from the current common model instead of w^(T0). The
  rounds' own updates do not serve: only the sampled clients (10 of 30) train in a round,
  and each from its own cluster's model, so their updates are neither complete nor
  comparable (their cluster's model would dominate the distances). The cost is that of the
  clustering step, every pass: each client downloads the common model and uploads its
  update, counted as ``clustering`` communication (UCI-HAR: 21.4 MB a pass), plus one
  local epoch per client. With ``--cluster-signal labels`` the signal is the label
  histogram (a few bytes; it does not change between passes).
* **Space**: ``G_k`` on unit vectors (AS-CFL's ``--em-space unit`` default, the direction of
  an update, as the pipeline's cosine clustering compares them); clients weighted by their
  training windows in the centroids (AS-CFL's M-step).
* **No EM step**: AS-CFL's Stage 2 first moves clients to the nearest centroid (EM); here
  only the split/merge pass runs, so a client changes cluster only by a split or a merge and
  every new cluster has a clear parent (or parents) whose model it starts from. CA-AFP's
  clusters are the average-linkage cut of the same kind of signal, which EM's k-means
  step would only reshuffle.
* **Guards**: the merge guard is AS-CFL's default ``compact`` (the union's ``G`` must be
  ``<= α``), singletons are kept apart (AS-CFL's ``keep``), and a merge that reunites the
  halves of the previous pass's split is refused (AS-CFL's oscillation guard). The split
  guard defaults to ``halves`` (a split is made only if both halves' ``G <= β``), where
  AS-CFL's default is ``none``: measured on UCI-HAR as the clients are (seed 0, K = 3,
  27/2/1-like clusters), the big cluster of like clients has ``G`` 0.83-0.85 > β and,
  without the guard, five passes take K from 3 to 15-19 clusters of one to five clients;
  with it K stays 3, while the two-class clusters of ``--classes-per-client 1`` still split
  into their classes (their halves' ``G`` are about 0.3).
* **At most** ``--max-clusters`` clusters (every Phase 2-3 round trains at least one client
  per cluster, so it must not exceed ``--clients-per-round``): when a pass would exceed it,
  its splits of the least dispersed parents (smallest ``G``) are undone until K fits
  (``capped`` in the record).
* **A new cluster's model**: a half of a split starts from its parent's model and mask; a
  merged cluster's model is the average of its parts' models weighted by their training
  windows (the pipeline's aggregation, Eq. 6). Its **mask** is the union of the parts' masks
  (a weight either part kept) re-pruned by the magnitude of the averaged model to the larger
  of the parts' sparsities, over the kernels the policy prunes (``--prune-layers``), with
  the run's ``--block`` and ``--budget``; the model is then masked. So a merge never leaves a
  cluster denser than the schedule, also after the last mask update, and the policy's next
  mask update continues from it (prune-and-heal counts the active weights it finds). In the
  dense Phase 2 the masks are all ones and the merged model is the plain weighted average.
* **Numbering**: after a pass the clusters are numbered 0..K'-1 by their first client (as
  the first clustering numbers them); ``reclusters.json`` names the clusters before and
  after each pass by those numbers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from fedprune.algorithms.ascfl.split_merge import Adjustment, SplitPair, adjust_clusters
from fedprune.configs.pipeline import PipelineConfig
from fedprune.sparsity import masks as M
from fedprune.sparsity.layers import merge, select

Weights = list[np.ndarray]

# the merge guard and singleton policy of AS-CFL's defaults (module text)
MERGE_GUARD = "compact"
SINGLETONS = "keep"


def renumber(labels: np.ndarray) -> np.ndarray:
    """``labels`` renumbered 0..K-1 by first appearance (int64)."""
    order = {label: i for i, label in enumerate(dict.fromkeys(np.asarray(labels).tolist()))}
    return np.array([order[label] for label in np.asarray(labels).tolist()], dtype=np.int64)


@dataclasses.dataclass(frozen=True)
class ReclusterRule:
    """The settings of ``--recluster split-merge``: a pass before every ``every``-th clustered
    round (:meth:`due`), AS-CFL's thresholds β (``split_threshold``) and α
    (``merge_threshold``), the split guard, the most clusters allowed, and the mask unit and
    budget a merged cluster's mask is re-pruned with."""

    every: int
    split_threshold: float = 0.8
    merge_threshold: float = 0.2
    split_guard: str = "halves"
    max_clusters: int = 8
    block: int = 1
    budget: str = "global"

    @classmethod
    def from_config(cls, config: PipelineConfig) -> ReclusterRule | None:
        """The rule ``config`` asks for; ``None`` with ``--recluster none``."""
        if config.recluster == "none":
            return None
        return cls(
            config.recluster_every,
            config.split_threshold,
            config.merge_threshold,
            config.split_guard,
            config.max_clusters,
            config.block,
            config.budget,
        )

    def due(self, j: int) -> bool:
        """Whether a pass runs before clustered round ``j`` (1-based over Phases 2-3):
        ``j = every + 1, 2 every + 1, ...``."""
        return j > 1 and (j - 1) % self.every == 0

    def adjust(
        self,
        signals: np.ndarray,
        labels: np.ndarray,
        sizes: np.ndarray,
        previous_splits: Sequence[SplitPair] = (),
    ) -> tuple[Adjustment, np.ndarray, int]:
        """One split/merge pass on the clients' ``signals`` (rows, client order) from
        ``labels``: AS-CFL's :func:`~fedprune.algorithms.ascfl.split_merge.adjust_clusters`
        with this rule's settings (unit vectors, windows as weights), then
        :func:`cap_splits`. Returns the adjustment, the new labels and how many splits the
        cap undid."""
        adjustment = adjust_clusters(
            signals,
            renumber(labels),
            sizes,
            split_threshold=self.split_threshold,
            merge_threshold=self.merge_threshold,
            singletons=SINGLETONS,
            previous_splits=previous_splits,
            split_guard=self.split_guard,
            merge_guard=MERGE_GUARD,
            normalize=True,
        )
        after, capped = cap_splits(adjustment, renumber(labels), self.max_clusters)
        return adjustment, after, capped


def cap_splits(
    adjustment: Adjustment, start: np.ndarray, max_clusters: int
) -> tuple[np.ndarray, int]:
    """``adjustment``'s labels with splits undone until at most ``max_clusters`` clusters
    remain: the splits of the parents with the smallest ``G`` (then the lowest first client)
    first; ``start`` are the labels entering the pass (0..K-1 by first appearance). Returns
    the labels (0..K'-1 by first appearance) and the number of splits undone. A pass that
    entered with at most ``max_clusters`` clusters always fits once its splits are undone
    (merges only reduce K)."""
    labels = renumber(adjustment.labels)
    ratio = adjustment.geometry.ratio
    order = sorted(
        adjustment.splits, key=lambda pair: (ratio[start[min(pair[0])]], min(pair[0] | pair[1]))
    )
    undone = 0
    for first, second in order:
        if labels.max() + 1 <= max_clusters:
            break
        labels[sorted(second)] = labels[min(first)]
        labels = renumber(labels)
        undone += 1
    return labels, undone


@dataclasses.dataclass(frozen=True)
class ReclusterEvent:
    """One pass: its run ``round`` (the first round the new clusters train in), each client's
    cluster ``before`` and ``after`` it (sorted client-id order), ``G_k`` of the clusters
    entering it (``ratio``, by cluster number; ``nan`` with one cluster) and how many splits
    the ``--max-clusters`` cap undid (``capped``)."""

    round: int
    before: np.ndarray
    after: np.ndarray
    ratio: np.ndarray
    capped: int = 0

    @property
    def k_before(self) -> int:
        return int(self.before.max()) + 1

    @property
    def k_after(self) -> int:
        return int(self.after.max()) + 1

    def parents(self) -> dict[int, list[int]]:
        """New cluster -> the clusters (before the pass) its clients came from."""
        return {
            int(n): sorted(set(self.before[self.after == n].tolist())) for n in range(self.k_after)
        }

    def splits(self) -> list[tuple[int, list[int]]]:
        """(old cluster, its new halves) for every split."""
        children: dict[int, list[int]] = {}
        for new, olds in self.parents().items():
            if len(olds) == 1:
                children.setdefault(olds[0], []).append(new)
        return [(old, news) for old, news in sorted(children.items()) if len(news) > 1]

    def merges(self) -> list[tuple[list[int], int]]:
        """(old clusters, the new cluster) for every merge."""
        return [(olds, new) for new, olds in self.parents().items() if len(olds) > 1]

    def split_pairs(self) -> tuple[SplitPair, ...]:
        """The member sets (client positions) of the halves of this pass's splits: AS-CFL's
        ``previous_splits`` of the next pass (a merge may not reunite them)."""
        return tuple(
            (
                frozenset(np.flatnonzero(self.after == a).tolist()),
                frozenset(np.flatnonzero(self.after == b).tolist()),
            )
            for _, (a, b, *_) in self.splits()
        )

    def record(self, ids: Sequence[int]) -> dict:
        """The entry of ``reclusters.json`` (client ids from ``ids``, sorted order)."""

        def members(labels: np.ndarray, c: int) -> list[int]:
            return [int(ids[i]) for i in np.flatnonzero(labels == c)]

        return {
            "round": self.round,
            "clusters_before": self.k_before,
            "clusters_after": self.k_after,
            "G": {str(c): _json_ratio(g) for c, g in enumerate(self.ratio)},
            "splits": [
                {"cluster": old, "into": news, "clients": [members(self.after, n) for n in news]}
                for old, news in self.splits()
            ],
            "merges": [
                {"clusters": olds, "into": new, "clients": members(self.after, new)}
                for olds, new in self.merges()
            ],
            "splits_undone_for_max_clusters": self.capped,
        }


def _json_ratio(g: float) -> float | str | None:
    """``G`` in ``reclusters.json``: ``null`` where undefined (one cluster), ``"inf"`` where
    the nearest centroid coincides."""
    if np.isnan(g):
        return None
    return "inf" if np.isinf(g) else round(float(g), 6)


def event_of(
    t: int, before: np.ndarray, after: np.ndarray, adjustment: Adjustment, capped: int
) -> ReclusterEvent:
    """The record of a pass: ``G_k`` mapped from the pass's numbering (first appearance of
    ``before``) to the clusters' numbers in ``before``."""
    k = int(before.max()) + 1
    ratio = np.full(k, np.nan)
    position = renumber(before)
    for c in range(k):
        ratio[c] = adjustment.geometry.ratio[position[np.flatnonzero(before == c)[0]]]
    return ReclusterEvent(t, before.astype(np.int64), after.astype(np.int64), ratio, capped)


# a checkpoint holds finite numbers only: G (>= 0) is saved with these codes for the others
_UNDEFINED, _INFINITE = -1.0, -2.0


def events_to_arrays(events: Sequence[ReclusterEvent], n: int) -> list[np.ndarray]:
    """The checkpoint form of the passes so far (``n`` clients): [rounds (P,) int64, before
    (P, n) int64, after (P, n) int64, G (P, n) float64, capped (P,) int64]. A checkpoint holds
    finite numbers only, so an undefined ``G`` (``nan``: one cluster) and the places past
    each pass's K are saved as -1, an infinite one (coinciding centroids) as -2."""
    ratio = np.full((len(events), n), _UNDEFINED)
    for p, e in enumerate(events):
        g = np.where(np.isnan(e.ratio), _UNDEFINED, e.ratio)
        ratio[p, : len(e.ratio)] = np.where(np.isinf(g), _INFINITE, g)
    return [
        np.array([e.round for e in events], np.int64),
        np.array([e.before for e in events], np.int64).reshape(len(events), n),
        np.array([e.after for e in events], np.int64).reshape(len(events), n),
        ratio,
        np.array([e.capped for e in events], np.int64),
    ]


def events_from_arrays(arrays: Sequence[np.ndarray]) -> list[ReclusterEvent]:
    """What :func:`events_to_arrays` saved."""
    rounds, before, after, ratio, capped = arrays
    return [
        ReclusterEvent(int(t), b.astype(np.int64), a.astype(np.int64), _ratio(g, b), int(c))
        for t, b, a, g, c in zip(rounds.tolist(), before, after, ratio, capped.tolist())
    ]


def _ratio(saved: np.ndarray, before: np.ndarray) -> np.ndarray:
    g = np.asarray(saved[: int(before.max()) + 1], np.float64)
    return np.where(g == _UNDEFINED, np.nan, np.where(g == _INFINITE, np.inf, g))


def common_model(
    cluster_w: Mapping[int, Sequence[np.ndarray]], assignment: np.ndarray, sizes: np.ndarray
) -> Weights:
    """The model every client trains from for a pass's signal: the cluster models averaged
    with weights the training windows of each cluster's clients."""
    mass = {c: float(sizes[assignment == c].sum()) for c in cluster_w}
    return weighted_average([cluster_w[c] for c in sorted(mass)], [mass[c] for c in sorted(mass)])


def weighted_average(models: Sequence[Sequence[np.ndarray]], weights: Sequence[float]) -> Weights:
    """``sum_p weights_p models_p / sum_p weights_p`` per tensor (in float64, returned in each
    tensor's dtype)."""
    total = float(sum(weights))
    return [
        (sum(w / total * np.asarray(m[j], np.float64) for m, w in zip(models, weights))).astype(
            np.asarray(models[0][j]).dtype
        )
        for j in range(len(models[0]))
    ]


def merged_cluster(
    models: Sequence[Sequence[np.ndarray]],
    masks: Sequence[Sequence[np.ndarray]],
    mass: Sequence[float],
    scope: Sequence[bool],
    block: int = 1,
    budget: str = "global",
) -> tuple[Weights, Weights]:
    """A merged cluster's model and mask (module text): the parts' models averaged with
    weights ``mass`` (their training windows); the union of their masks re-pruned, over the
    kernels in ``scope``, by the magnitude of that average to the largest of the parts'
    sparsities there; the model masked."""
    average = weighted_average(models, mass)
    union = [
        np.maximum.reduce([np.asarray(m[j], np.float32) for m in masks])
        for j in range(len(masks[0]))
    ]
    if any(scope):
        target = max(M.sparsity(select(m, scope)) for m in masks)
        kernels = M.prune_to(
            select(union, scope),
            [np.abs(w) for w in select(average, scope)],
            target,
            block,
            budget,
        )
        union = [k if s else u for k, u, s in zip(merge(kernels, union, scope), union, scope)]
    return M.apply(average, union), union


def regroup_models(
    cluster_w: Mapping[int, Sequence[np.ndarray]],
    cluster_m: Mapping[int, Sequence[np.ndarray]],
    before: np.ndarray,
    after: np.ndarray,
    sizes: np.ndarray,
    scope: Sequence[bool],
    block: int = 1,
    budget: str = "global",
) -> tuple[dict[int, Weights], dict[int, Weights]]:
    """The models and masks of the clusters ``after`` a pass from those ``before`` it: a
    cluster with one parent (unchanged, or a half of a split) starts from a copy of its
    parent's model and mask; a merged one is :func:`merged_cluster` of its parents, weighted
    by their clients' training windows ``sizes``."""
    new_w: dict[int, Weights] = {}
    new_m: dict[int, Weights] = {}
    for new in range(int(after.max()) + 1):
        parents = sorted(set(before[after == new].tolist()))
        if len(parents) == 1:
            new_w[new] = [np.array(w, copy=True) for w in cluster_w[parents[0]]]
            new_m[new] = [np.array(m, copy=True) for m in cluster_m[parents[0]]]
        else:
            new_w[new], new_m[new] = merged_cluster(
                [cluster_w[p] for p in parents],
                [cluster_m[p] for p in parents],
                [float(sizes[before == p].sum()) for p in parents],
                scope,
                block,
                budget,
            )
    return new_w, new_m
