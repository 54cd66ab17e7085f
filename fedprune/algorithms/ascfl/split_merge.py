"""AS-CFL Section 3.3 / Algorithm 1 lines 17-24: dynamic cluster adjustment -- EM
refinement, then split and merge by the dispersion-to-separation ratio ``G_k``.

The functions work on one vector per client (``points``): the clients' updates, or the
low-rank coefficients of :func:`.similarity.low_rank_similarity` (the same representation
the clustering used is the natural choice; the paper does not say which).

Paper sentences and how they are read:

* E-step -- "clients are reassigned to clusters on the basis of the shortest distance to
  cluster centers" (3.3): Euclidean distance, ties to the lower cluster number; a cluster
  left empty disappears (K may shrink).
* M-step -- "cluster centers are updated as a weighted average of client updates" (3.3): the
  data-size weighted mean (equal weights without ``data_sizes``).
* Iterations -- "The EM process iterates until convergence, typically within 5-10
  iterations" (3.3): until no assignment changes, at most ``max_iter = 10`` E-steps.
* G_k -- "The intra-cluster dispersion ... is calculated as the average Euclidean distance
  between the model updates of clients in the cluster and their centroid" and "The
  inter-cluster separation ... is defined as the Euclidean distance from the cluster's
  centroid to the nearest other cluster's centroid" (3.3): ``G_k = D_k / S_k`` with ``D_k``
  the unweighted mean of ``||x_i - c_k||`` over the members and ``c_k`` the M-step centroid.
  ``normalize=True`` divides every vector by its norm first (Euclidean distance between
  directions, ``sqrt(2 - 2 cos)``, matching the cosine similarity of 3.2.1 when update sizes
  differ a lot). With one cluster there is no other centroid: ``G`` is ``nan`` and nothing is
  split or merged (Sattler's criterion in :mod:`.cfl` can test a lone cluster). Coinciding
  centroids (``S_k = 0``) give ``G_k = inf`` (``0`` when ``D_k = 0`` too).
* Split -- "When the value of G_k exceeds a predefined splitting threshold β (β = 0.8) ...
  cluster k will be split into smaller sub-clusters" (3.3): a two-way split (the number of
  sub-clusters is not given), by 2-means seeded with the cluster's two farthest members
  (``split_method="two_means"``) or by the cosine bipartition of :mod:`.cfl`
  (``"min_cross_similarity"``). A cluster needs two members to split.
* Merge -- "if the value of G_k falls below a predefined merging threshold (α = 0.2) ... it
  may be merged with a nearby similar cluster" (3.3): with the cluster whose centroid
  defines ``S_k`` (the nearest); each cluster takes part in at most one split or merge per
  pass, and merge candidates are taken in increasing ``G_k``.
* Singletons -- a single client has ``D_k = 0`` so ``G_k = 0 < α``: read literally, every
  singleton would merge. A singleton exists because the positive incentive refused it
  ("reducing the inclusion of outliers", 3.2.1), so by default (``singletons="keep"``) no
  singleton takes part in a merge; ``singletons="merge"`` applies the rule to them too.
* Oscillation -- the paper has no guard. Two are applied: a merge is made only if the merged
  cluster's own ``G`` stays ``<= β`` (else the next pass would split it again; a merge that
  would leave a single cluster has no ``G`` and is refused, since ``G`` could then never be
  evaluated again), and a merge that would reunite the two halves of a split made in the
  previous pass (``previous_splits``, returned as :attr:`Adjustment.splits`) is refused.
* One pass -- "for each cluster ... Compute the dispersion-to-separation ratio ... if G_k > β
  then Split ... else if G_k < α then Merge" (Algorithm 1 lines 19-24): every decision uses
  the ``G`` values of the configuration entering the pass; the union guard is evaluated on
  the configuration as updated so far.
* Split guard (no sentence; ``split_guard="halves"``, off by default) -- the counterpart of
  the merge's union guard: a split is made only if both halves' own ``G`` stays ``<= β`` in
  the configuration after it. Update directions carry SGD noise whose share grows as the
  models converge, so ``D_k`` of a group of like clients grows while ``S_k`` does not; its
  ``G_k`` passes β and, read literally, it is split. Two halves of such a group have nearby
  centroids (small ``S``), so each half's ``G`` is above β again and they can never get below
  α to merge back: K only grows. Two halves of a cluster that really holds two groups have
  far-apart centroids and small ``G``, and the guard lets that split through.
* Merge guard (``merge_guard``) -- "merged with a nearby similar cluster to prevent
  over-segmentation" (3.3) names the purpose, not a test of the union. ``"settled"``
  (default) is the oscillation guard above: the union's ``G <= β``. ``"compact"`` asks the
  union to be a cluster the rule itself calls compact and well separated, ``G <= α``: two
  parts of one group make such a union, two distinct groups (whose union's ``D`` is about
  half their distance) do not. Read literally, ``G_k < α`` marks a cluster that is compact
  *and far* from the others, which is the one least in need of merging: in a space where
  clusters' models drift apart (``--update-reference common``) every G falls below α and the
  settled guard lets distinct groups merge.
* ``split_threshold`` must exceed ``merge_threshold``, else a cluster could qualify for both.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import numpy as np

from fedprune import checks
from fedprune.algorithms.ascfl import cfl
from fedprune.algorithms.ascfl._arrays import (
    ClientIds,
    check_nonzero,
    label_array,
    update_matrix,
    weights_from_sizes,
)
from fedprune.algorithms.ascfl.similarity import cosine_similarity_matrix
from fedprune.errors import ConfigError, DataError

SplitMethod = Literal["two_means", "min_cross_similarity"]
SPLIT_METHODS: tuple[str, ...] = ("two_means", "min_cross_similarity")
SingletonPolicy = Literal["keep", "merge"]
SINGLETON_POLICIES: tuple[str, ...] = ("keep", "merge")
SplitGuard = Literal["none", "halves"]
SPLIT_GUARDS: tuple[str, ...] = ("none", "halves")
MergeGuard = Literal["settled", "compact"]
MERGE_GUARDS: tuple[str, ...] = ("settled", "compact")
SplitPair = tuple[frozenset[int], frozenset[int]]
SPLIT_THRESHOLD = 0.8  # the paper's β (Section 3.3)
MERGE_THRESHOLD = 0.2  # the paper's α


def check_thresholds(split_threshold: float, merge_threshold: float) -> None:
    """β > α >= 0 (``ConfigError`` naming the parameter)."""
    checks.check_positive("split_threshold", split_threshold)
    checks.check_nonnegative("merge_threshold", merge_threshold)
    if split_threshold <= merge_threshold:
        raise ConfigError(
            f"--split-threshold ({split_threshold:g}) must be greater than --merge-threshold "
            f"({merge_threshold:g}), else a cluster could be both split and merged"
        )


def _points(points: object, normalize: bool, client_ids: ClientIds) -> np.ndarray:
    x = update_matrix(points, client_ids)
    if normalize:
        check_nonzero(x, client_ids)
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
    return x


def cluster_centers(points: np.ndarray, labels: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """M-step (3.3): ``c_k = sum_{i in k} p_i x_i / sum_{i in k} p_i`` for labels 0..K-1."""
    k = int(labels.max()) + 1
    mass = np.bincount(labels, weights=weights, minlength=k)
    sums = np.zeros((k, points.shape[1]))
    np.add.at(sums, labels, weights[:, None] * points)
    return sums / mass[:, None]


def _distances(points: np.ndarray, centers: np.ndarray) -> np.ndarray:
    return np.linalg.norm(points[:, None, :] - centers[None, :, :], axis=2)


@dataclasses.dataclass(frozen=True)
class EmResult:
    """Result of :func:`em_refine`: labels 0..K-1 (first appearance), their centres, the
    number of E-steps run, and whether the last one changed nothing."""

    labels: np.ndarray
    centers: np.ndarray
    iterations: int
    converged: bool


def em_refine(
    points: object,
    labels: object,
    data_sizes: object = None,
    *,
    max_iter: int = 10,
    normalize: bool = False,
    client_ids: ClientIds = None,
) -> EmResult:
    """Section 3.3's EM: alternate the M-step (weighted centres) and the E-step (nearest
    centre) from ``labels`` until no client moves or ``max_iter`` E-steps ran."""
    checks.check_count("em_iterations", max_iter)
    x = _points(points, normalize, client_ids)
    w = weights_from_sizes(data_sizes, len(x))
    current = label_array(labels, len(x))
    for iteration in range(1, max_iter + 1):
        centers = cluster_centers(x, current, w)
        moved = label_array(np.argmin(_distances(x, centers), axis=1), len(x))
        if np.array_equal(moved, current):
            return EmResult(current, centers, iteration, True)
        current = moved
    return EmResult(current, cluster_centers(x, current, w), max_iter, False)


@dataclasses.dataclass(frozen=True)
class ClusterGeometry:
    """Per cluster ``k`` (labels 0..K-1): centroid, member count, dispersion ``D_k``,
    separation ``S_k``, ``ratio = G_k = D_k / S_k`` and the ``nearest`` other cluster
    (``-1`` when there is none)."""

    centers: np.ndarray
    sizes: np.ndarray
    dispersion: np.ndarray
    separation: np.ndarray
    ratio: np.ndarray
    nearest: np.ndarray


def _geometry(x: np.ndarray, labels: np.ndarray, w: np.ndarray) -> ClusterGeometry:
    centers = cluster_centers(x, labels, w)
    k = len(centers)
    sizes = np.bincount(labels, minlength=k)
    to_own = np.linalg.norm(x - centers[labels], axis=1)
    dispersion = np.bincount(labels, weights=to_own, minlength=k) / sizes
    if k == 1:
        nan = np.array([np.nan])
        return ClusterGeometry(centers, sizes, dispersion, np.array([np.inf]), nan, np.array([-1]))
    between = _distances(centers, centers)
    np.fill_diagonal(between, np.inf)
    nearest = np.argmin(between, axis=1)
    separation = between[np.arange(k), nearest]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(
            separation > 0, dispersion / separation, np.where(dispersion > 0, np.inf, 0.0)
        )
    return ClusterGeometry(centers, sizes, dispersion, separation, ratio, nearest)


def dispersion_separation(
    points: object,
    labels: object,
    data_sizes: object = None,
    *,
    normalize: bool = False,
    client_ids: ClientIds = None,
) -> ClusterGeometry:
    """Section 3.3, Equation (8) and the two definitions after it: ``G_k = D_k / S_k`` for
    every cluster (labels renumbered 0..K-1 by first appearance)."""
    x = _points(points, normalize, client_ids)
    w = weights_from_sizes(data_sizes, len(x))
    return _geometry(x, label_array(labels, len(x)), w)


def _min_cross_similarity(x: np.ndarray, w: np.ndarray, max_iter: int) -> np.ndarray:
    """The second part of :func:`.cfl.optimal_bipartition` of the cosine similarities."""
    _, second = cfl.optimal_bipartition(cosine_similarity_matrix(x))
    mask = np.zeros(len(x), dtype=bool)
    mask[second] = True
    return mask


def _two_means(x: np.ndarray, w: np.ndarray, max_iter: int) -> np.ndarray:
    """Weighted 2-means seeded by the two members farthest apart; the side without
    member 0."""
    pairwise = _distances(x, x)
    if pairwise.max() == 0:
        raise DataError("cannot split a cluster whose members' vectors are all identical")
    a, b = np.unravel_index(int(np.argmax(pairwise)), pairwise.shape)
    centers = x[[a, b]]
    side = np.argmin(_distances(x, centers), axis=1)
    for _ in range(max_iter):
        if side.min() == side.max():  # one side emptied (degenerate): keep the seed split
            side = np.argmin(_distances(x, x[[a, b]]), axis=1)
            break
        centers = cluster_centers(x, side, w)
        moved = np.argmin(_distances(x, centers), axis=1)
        if np.array_equal(moved, side):
            break
        side = moved
    return side != side[0]


# split_method -> (points, weights, max_iter) -> the mask of the second part
_BIPARTITIONS = {"two_means": _two_means, "min_cross_similarity": _min_cross_similarity}


def bipartition(
    points: object,
    data_sizes: object = None,
    *,
    split_method: SplitMethod = "two_means",
    max_iter: int = 10,
) -> np.ndarray:
    """Split one cluster in two (Section 3.3 "split into smaller sub-clusters"). Returns a
    boolean mask: ``True`` for the clients of the second part (the one without client 0).

    ``"two_means"``: the two members farthest apart (ties: lowest indices) seed a weighted
    2-means on Euclidean distance; ``"min_cross_similarity"``: :func:`.cfl.optimal_bipartition`
    of the members' cosine similarities.
    """
    checks.check_choice("split_method", split_method, SPLIT_METHODS)
    checks.check_count("split_iterations", max_iter)
    x = update_matrix(points)
    n = len(x)
    if n < 2:
        raise ConfigError(f"a split needs at least 2 clients, got {n}")
    return _BIPARTITIONS[split_method](x, weights_from_sizes(data_sizes, n), max_iter)


@dataclasses.dataclass(frozen=True)
class Adjustment:
    """Result of :func:`adjust_clusters`.

    ``labels``: the new labels 0..K'-1 (first appearance); ``splits``: for each split, the
    member sets of its two halves (pass them as ``previous_splits`` next round); ``merges``:
    for each merge, the member sets of the two merged clusters; ``geometry``: ``G`` and its
    parts for the clusters entering the pass; ``refused_splits``: clusters above β whose
    split the split guard refused.
    """

    labels: np.ndarray
    splits: tuple[SplitPair, ...]
    merges: tuple[SplitPair, ...]
    geometry: ClusterGeometry
    refused_splits: int = 0


def _reunites(a: frozenset, b: frozenset, previous_splits: Iterable[SplitPair]) -> bool:
    return any((a & p and b & q) or (a & q and b & p) for p, q in previous_splits)


def adjust_clusters(
    points: object,
    labels: object,
    data_sizes: object = None,
    *,
    split_threshold: float = SPLIT_THRESHOLD,
    merge_threshold: float = MERGE_THRESHOLD,
    singletons: SingletonPolicy = "keep",
    previous_splits: Sequence[SplitPair] = (),
    split_method: SplitMethod = "two_means",
    split_guard: SplitGuard = "none",
    merge_guard: MergeGuard = "settled",
    normalize: bool = False,
    client_ids: ClientIds = None,
) -> Adjustment:
    """Algorithm 1 lines 18-24: one pass of splits (``G_k > split_threshold``) and merges
    (``G_k < merge_threshold``), with the singleton policy and oscillation guards of the
    module docstring. Defaults β = 0.8 and α = 0.2 are the paper's (3.3)."""
    check_thresholds(split_threshold, merge_threshold)
    checks.check_choice("singletons", singletons, SINGLETON_POLICIES)
    checks.check_choice("split_method", split_method, SPLIT_METHODS)
    checks.check_choice("split_guard", split_guard, SPLIT_GUARDS)
    checks.check_choice("merge_guard", merge_guard, MERGE_GUARDS)
    x = _points(points, normalize, client_ids)
    n = len(x)
    w = weights_from_sizes(data_sizes, n)
    start = label_array(labels, n)
    geometry = _geometry(x, start, w)
    k = len(geometry.centers)
    if k < 2:
        return Adjustment(start, (), (), geometry)
    members = [np.flatnonzero(start == c) for c in range(k)]
    ratio = geometry.ratio
    current = start.copy()
    splits: list[SplitPair] = []
    consumed: set[int] = set()
    refused = 0
    for c in range(k):
        if len(members[c]) >= 2 and ratio[c] > split_threshold:
            second = bipartition(x[members[c]], w[members[c]], split_method=split_method)
            trial = current.copy()
            trial[members[c][second]] = k + len(splits)
            if split_guard == "halves" and not _halves_settled(
                x, trial, w, members[c], second, split_threshold
            ):
                refused += 1
                continue
            current = trial
            splits.append((_set(members[c][~second]), _set(members[c][second])))
            consumed.add(c)

    def mergeable(c: int) -> bool:
        return c not in consumed and (singletons == "merge" or len(members[c]) >= 2)

    merges: list[SplitPair] = []
    for c in sorted(range(k), key=lambda c: (ratio[c], c)):
        if not ratio[c] < merge_threshold:
            break
        other = int(geometry.nearest[c])
        if not (mergeable(c) and mergeable(other)):
            continue
        a, b = _set(members[c]), _set(members[other])
        if _reunites(a, b, previous_splits):
            continue
        trial = current.copy()
        trial[members[other]] = c
        trial = label_array(trial, n)
        union = _geometry(x, trial, w).ratio[trial[members[c][0]]]
        bound = split_threshold if merge_guard == "settled" else merge_threshold
        if not union <= bound:  # nan: no other cluster would be left
            continue
        current[members[other]] = c
        consumed |= {c, other}
        merges.append((a, b))
    return Adjustment(label_array(current, n), tuple(splits), tuple(merges), geometry, refused)


def _halves_settled(
    x: np.ndarray,
    trial: np.ndarray,
    w: np.ndarray,
    members: np.ndarray,
    second: np.ndarray,
    split_threshold: float,
) -> bool:
    """The split guard: both halves' ``G <= β`` in the configuration ``trial``."""
    renumbered = label_array(trial, len(x))
    ratio = _geometry(x, renumbered, w).ratio
    halves = (renumbered[members[~second][0]], renumbered[members[second][0]])
    return all(ratio[h] <= split_threshold for h in halves)


def _set(indices: np.ndarray) -> frozenset[int]:
    return frozenset(int(i) for i in indices)


# what dynamic_adjustment passes on to adjust_clusters (its own keywords apart)
_ADJUSTMENT_KEYWORDS = frozenset(
    name
    for name, p in inspect.signature(adjust_clusters).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY and name not in ("normalize", "client_ids")
)


def dynamic_adjustment(
    points: object,
    labels: object,
    data_sizes: object = None,
    *,
    max_iter: int = 10,
    normalize: bool = False,
    client_ids: ClientIds = None,
    **adjustment: Any,
) -> tuple[EmResult, Adjustment]:
    """Stage 2 of Algorithm 1 as Section 3.3 orders it: EM refinement of the initial clusters
    (:func:`em_refine`), then one split/merge pass (:func:`adjust_clusters`, which takes the
    keywords ``adjustment``: thresholds, singleton policy, previous splits, split method and
    guards) on its labels. The keywords and thresholds are checked before EM runs."""
    unknown = sorted(set(adjustment) - _ADJUSTMENT_KEYWORDS)
    if unknown:
        raise TypeError(f"dynamic_adjustment() got unexpected keyword(s): {', '.join(unknown)}")
    check_thresholds(
        adjustment.get("split_threshold", SPLIT_THRESHOLD),
        adjustment.get("merge_threshold", MERGE_THRESHOLD),
    )
    em = em_refine(
        points, labels, data_sizes, max_iter=max_iter, normalize=normalize, client_ids=client_ids
    )
    return em, adjust_clusters(
        points, em.labels, data_sizes, normalize=normalize, client_ids=client_ids, **adjustment
    )
