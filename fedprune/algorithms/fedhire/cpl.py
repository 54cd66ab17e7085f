"""Competitive penalized learning (CPL), shared by FCPL (clients, Fed-HIRE §3.2, Algorithm 1)
and MCPL (server, §3.3, which "applies the competitive penalized learning process (Eqs.
(1)-(10))" to the stacked clusterlet centroids).

Candidate clusters compete for objects (Eq. 4 winner, Eq. 7 rival, Eq. 5-6 relative winning
chance); the winner is rewarded (Eq. 8), the rival penalized (Eq. 9), the intermediate
weights squashed into ``w_j`` (Eq. 10); feature-cluster weights ``M`` come from a Hellinger
distance and an intra-cluster similarity (Appendix A.1, Eq. A.1-A.6). Clusters whose weight
"approaches zero" are eliminated, so the number of clusters falls from ``k0``.

Paper sentences and how they are read (options where two readings are plausible):

* Similarity -- "s(x_i, C_j) measures object-cluster similarity, defined as
  ||m_j · (x_i - c_j)||_2" (Eq. 2) and "v = argmax_j [γ_j w_j s(x_i, C_j)]" (Eq. 4). The norm
  is a distance: maximised literally, every object would join its *farthest* cluster, and
  Remark 1's fairness ("gradually reducing its [a frequent winner's] relative winning
  probability") only works if a larger product means a better match. So ``s`` is read as a
  similarity derived from the weighted distance ``d = ||m_j ⊙ (x_i - c_j)||_2``:
  ``similarity="inverse"`` (default) ``s = 1 / (d + 1e-12)`` (scale-free, so the Eq. 9 ratio
  ``s_r / s_v = d_v / d_r`` needs no kernel width), ``similarity="gaussian"``
  ``s = exp(-d² / 2)`` (the kernel of Eq. A.5).
* Weighted norm -- Eq. 2's ``||m_j · (x_i - c_j)||_2`` scales the difference by ``m_j``
  (``norm="scaled"``: ``d² = Σ_z m_jz² (x_iz - c_jz)²``), or is the norm weighted by ``m_j``
  (``norm="weighted"``, default: ``d² = Σ_z m_jz (x_iz - c_jz)²``, the usual weighted
  Euclidean norm). The two differ in scale: ``m_j`` sums to 1 over the ``D``
  features, so ``"scaled"`` distances are ~``√D`` times shorter, every Gaussian similarity is
  near 1 and Eq. 9's ratio ``s_r / s_v`` near 1 (a rival loses about what a winner gains;
  measured: one MCPL run eliminates down to 1-3 clusters). With ``"weighted"`` and uniform
  ``m = 1/D``, ``exp(-d²/2)`` is the geometric mean of Eq. A.5's per-feature kernels. Eq. 14's
  norm (k-modes) takes the same reading (:mod:`.kmodes`).
* Winning chance -- "γ_j = 1 - g_j / Σ_t g_t" (Eq. 5), "g_j records the winning times of C_j
  within learning iterations" (Eq. 6): ``g`` counts wins over all epochs of one CPL run (reset
  only between MCPL levels, §3.3 "resetting all internal learning factors"); before the first
  win (``Σ g = 0``) every ``γ_j = 1``.
* Rival -- "r = argmax_{j != v} [γ_j w_j s]" (Eq. 7): the second-best active cluster; with a
  single active cluster there is no rival and no penalty.
* Reward / penalty -- Eq. 8 ``W_v += η``, Eq. 9 ``W_r -= η s_r / s_v``, Eq. 10
  ``w_j = 1 / (1 + e^{-10 (W_j + 5)})``; A.2 sets "the clusterlet weights W ... to w_j = 1".
  Literally (``weight="paper"``) ``W_j = 0`` at the start and ``w_j = 1 / (1 + e^{-50})``:
  ``w`` stays within 1e-4 of 1 until ``W < -4.1``, so about 80 net penalties of η = 0.05 pass
  before a weight can move any assignment, and the literal stop of Algorithm 1 line 8 ends
  the run long before (measured: nothing is ever eliminated). ``weight="shifted"`` (default)
  reads the exponent as ``-10 W_j + 5`` with ``W_j = 1`` at the start (``w_j = 0.9933``, "set
  to w_j = 1"): ``w = 0.5`` at ``W = 0.5`` and ``w`` "approaches zero" as ``W`` nears 0, about
  20 net penalties away, so the competition moves assignments from the first epochs and the
  literal stop ends a run once they settle.
* Penalty ratio -- "C_r is penalized by a step, which depends on the similarity ratio between
  the object and the two competing clusterlets" (Eq. 9, ``η s_r / s_v``). With ``s`` a
  similarity (``penalty="similarity"``, default) the ratio is <= 1 for most objects and a
  rival close to the object is penalised most (the rival-penalisation idea). Eq. 9 with
  Eq. 2's norm taken literally (``penalty="distance"``) is ``η d_r / d_v`` >= 1, unbounded when
  the object sits on its winner's centroid (a singleton): far rivals are penalised most and a
  singleton's rival is eliminated at once. Both keep Eq. 4's winner (``argmax γ w / d`` equals
  ``argmin d / (γ w)``). ``penalty="score"`` takes the ratio of the quantities that chose the
  winner and the rival in Eq. 4 and 7, ``γ_r w_r s_r / (γ_v w_v s_v)`` (<= 1 always): a rival
  that is itself losing (small ``w_r``) or winning often (small ``γ_r``) is penalised less.
* Sequential updates -- Algorithm 1 lines 3-7 and A.2 ("Each data object ... is then assigned
  to its winning clusterlet ..., while the weights of the winner w_v and its nearest rival w_r
  are updated") update ``W`` and ``g`` after every object, so the next object competes with
  the new values: ``update="sequential"`` (default) loops over the objects of an epoch in
  index order (Algorithm 1 line 3, "for i = 1 to n"). Everything that does not change within
  an epoch (centroids, ``M``, hence the n x k similarity matrix) is computed once per epoch as
  matrix operations; the loop body touches one row of length k. ``update="batch"`` is the
  fully vectorized reading: every object competes with the epoch-start ``γ``, ``w`` and the
  rewards / penalties / wins of the epoch are summed at once.
* Centroids -- Algorithm 1 never says how ``c_j`` moves. For fixed assignments and ``M`` the
  objective of Eq. 1-2 (weighted squared distance) is optimal at the members' mean, so after
  each epoch every non-empty cluster's centroid is the mean of its objects (a cluster without
  objects keeps its centroid).
* Feature weights -- "After all assignments, M is updated using Eqs. (A.1)-(A.6)" (A.2),
  initial ``m_jz = 1/d``. Eq. A.2 writes ``x_jz`` for ``x_iz`` (read as the object's feature).
  Eq. A.3-A.4 divide by ``|C| - 1``: a part with fewer than 2 objects has variance 0. A.1 with
  both variances 0 is the Bhattacharyya coefficient of two point masses (1 for equal means,
  else 0). Eq. A.5 reads ``β_jz = sqrt(Σ_i exp(-½ (x_iz - c_jz)²)) / |C_j|`` literally
  (``beta="sqrt"``, default); the text calls it "the average distance", so ``beta="mean"``
  uses ``Σ_i exp(...) / |C_j|``. (The ``1/|C_j|`` factor cancels in Eq. A.6's normalisation
  over features; only the square root matters.) A row with ``Σ_t α_jt β_jt = 0`` gets
  ``1/d``; a cluster without objects keeps its row.
* Elimination -- "Once the weight of a clusterlet approaches zero, it becomes inactive in
  subsequent epochs" (A.2), "its associated data objects will be reassigned to the remaining
  clusterlets" (§3.2): at the end of an epoch a cluster with ``w_j < eliminate_below``
  (default 0.01, i.e. ``W_j < -5.46``) leaves the competition for good (the last active
  cluster is never eliminated).
* Convergence -- "if Q_new = Q_old then convergence" (Algorithm 1 line 8): an epoch that
  leaves every assignment unchanged and eliminates no cluster (an elimination moves its
  objects, so the next epoch must run): ``stop="assignments"`` (default). ``stop="settled"``
  also runs on while an active cluster lost weight in the epoch, for the literal weights
  (``weight="paper"``), under which assignments settle before any weight can move them.
  ``max_epochs`` (default 300, not in the paper) bounds a run that never settles; the
  result says whether it converged.
* Result -- the clusters that are active and own at least one object after the last epoch;
  their number is ``k^(l)`` (FCPL) or ``k_δ`` (MCPL). Labels are renumbered 0..k-1 in the order
  of the surviving candidates; the centroids are the members' means.
* Starting k0 -- "k0 = 0.5 n^(l) for FCPL and k0 = 0.5 n^(s) for MCPL" (§4.1), Fig. 8 varies
  "k0 = 0.1n ... k0 = n": ``k0 = ceil(ratio · n)`` for a ratio in (0, 1], so 1 <= k0 <= n;
  the initial centroids are ``k0`` distinct objects drawn at random (Algorithm 1 line 1).
"""

from __future__ import annotations

import dataclasses
import math

import numba
import numpy as np
from threadpoolctl import threadpool_limits

from fedprune.checks import check_choice, check_count, check_range
from fedprune.errors import ConfigError

SIMILARITIES = ("inverse", "gaussian")
UPDATES = ("sequential", "batch")
BETAS = ("sqrt", "mean")
PENALTIES = ("similarity", "distance", "score")
STOPS = ("settled", "assignments")
WEIGHTS = ("paper", "shifted")
# Eq. 10 as w = 1 / (1 + e^{-10 W + offset}) and the W every cluster starts with, per reading
WEIGHT_OFFSET = {"paper": -50.0, "shifted": 5.0}
WEIGHT_START = {"paper": 0.0, "shifted": 1.0}
NORMS = ("scaled", "weighted")

_EPS = 1e-12


@dataclasses.dataclass(frozen=True)
class CplParams:
    """Parameters of one CPL run (defaults: §4.1, η = 0.05 and k0 = 0.5 n)."""

    eta: float = 0.05
    k0_ratio: float = 0.5
    eliminate_below: float = 0.01
    similarity: str = "gaussian"
    norm: str = "weighted"
    update: str = "sequential"
    beta: str = "sqrt"
    penalty: str = "similarity"
    stop: str = "assignments"
    max_epochs: int = 300
    weight: str = "shifted"

    def __post_init__(self) -> None:
        check_range("eta", self.eta, 0, low_open=True)
        check_range("k0_ratio", self.k0_ratio, 0, 1, low_open=True)
        check_range("eliminate_below", self.eliminate_below, 0, 1, low_open=True, high_open=True)
        check_choice("similarity", self.similarity, SIMILARITIES)
        check_choice("norm", self.norm, NORMS)
        check_choice("update", self.update, UPDATES)
        check_choice("beta", self.beta, BETAS)
        check_choice("penalty", self.penalty, PENALTIES)
        check_choice("stop", self.stop, STOPS)
        check_choice("weight", self.weight, WEIGHTS)
        check_count("max_epochs", self.max_epochs)


@dataclasses.dataclass(frozen=True)
class CplResult:
    """A converged (or ``max_epochs``-stopped) CPL run.

    labels : int64 (n,), cluster of each object in ``0..k-1``.
    centroids : float64 (k, d), mean of each cluster's objects.
    feature_weights : float64 (k, d), the last ``M`` rows of the surviving clusters.
    epochs : epochs run; converged : whether the last epoch changed nothing.
    log_factors : float64 (k,), ``ln(γ_j w_j)`` (Eq. 4's factor) of each surviving cluster
        in the last epoch, averaged over the objects (``update="sequential"``: each object
        met the values the previous ones left; ``"batch"``: all met the epoch-start ones).
        With ``centroids`` and ``feature_weights`` it decides the winner of a new object
        (the assigner, :mod:`.assigner`); ``None`` unless ``record_factors``.
    """

    labels: np.ndarray
    centroids: np.ndarray
    feature_weights: np.ndarray
    epochs: int
    converged: bool
    log_factors: np.ndarray | None = None

    @property
    def k(self) -> int:
        return int(self.centroids.shape[0])


def initial_k(n: int, ratio: float) -> int:
    """``k0 = ceil(ratio · n)`` (§4.1 "k0 = 0.5 n"), for ``ratio`` in (0, 1]."""
    check_range("k0_ratio", ratio, 0, 1, low_open=True)
    return max(1, min(n, math.ceil(ratio * n - 1e-9)))


def winning_chance(wins: np.ndarray) -> np.ndarray:
    """Eq. 5: ``γ_j = 1 - g_j / Σ_t g_t`` (all ones before the first win)."""
    total = wins.sum()
    if total <= 0:
        return np.ones(wins.shape, dtype=np.float64)
    return 1.0 - wins / total


def sigmoid_weight(w_raw: np.ndarray, offset: float = WEIGHT_OFFSET["paper"]) -> np.ndarray:
    """Eq. 10: ``w_j = 1 / (1 + e^{-10 W_j + offset})``; the paper's ``e^{-10 (W_j + 5)}`` is
    ``offset = -50`` (default), the ``"shifted"`` reading ``offset = 5``."""
    exponent = np.minimum(-10.0 * np.asarray(w_raw, dtype=np.float64) + offset, 700.0)
    return 1.0 / (1.0 + np.exp(exponent))


def weighted_distances(
    x: np.ndarray, centroids: np.ndarray, weights: np.ndarray, norm: str = "scaled"
) -> np.ndarray:
    """Eq. 2's norm for every object and cluster, (n, k): ``||m_j ⊙ (x_i - c_j)||_2``
    (``norm="scaled"``) or ``sqrt(Σ_z m_jz (x_iz - c_jz)²)`` (``"weighted"``)."""
    check_choice("norm", norm, NORMS)
    m2 = weights * weights if norm == "scaled" else weights
    sq = (x * x) @ m2.T - 2.0 * x @ (m2 * centroids).T + np.sum(m2 * centroids**2, axis=1)
    return np.sqrt(np.maximum(sq, 0.0))


def similarity(distances: np.ndarray, kind: str = "inverse") -> np.ndarray:
    """Eq. 2 read as a similarity (module docstring): ``1/(d + 1e-12)`` or ``exp(-d²/2)``."""
    check_choice("similarity", kind, SIMILARITIES)
    if kind == "inverse":
        return 1.0 / (distances + _EPS)
    return np.exp(-0.5 * distances * distances)


def winner_and_rival(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 4 and Eq. 7 for each row of ``scores`` = ``γ_j w_j s(x_i, C_j)`` (inactive: -inf).

    Returns the winner and the rival index per row (ties to the lower index; rival -1 when
    a row has a single finite score).
    """
    scores = np.atleast_2d(scores)
    rows = np.arange(scores.shape[0])
    winner = np.argmax(scores, axis=1)
    rest = scores.copy()
    rest[rows, winner] = -np.inf
    rival = np.argmax(rest, axis=1)
    rival[~np.isfinite(rest[rows, rival])] = -1
    return winner, rival


def reward_and_penalty(
    w_raw: np.ndarray,
    winner: np.ndarray,
    rival: np.ndarray,
    s_winner: np.ndarray,
    s_rival: np.ndarray,
    eta: float,
) -> np.ndarray:
    """Eq. 8-9 for a batch of objects: ``W_v += η`` and ``W_r -= η s_r / s_v``, summed.

    Objects with ``rival == -1`` are rewarded but penalise nobody. Returns a new array.
    """
    out = np.array(w_raw, dtype=np.float64, copy=True)
    winner = np.atleast_1d(winner)
    rival = np.atleast_1d(rival)
    np.add.at(out, winner, eta)
    has = rival >= 0
    ratio = np.atleast_1d(s_rival)[has] / np.maximum(np.atleast_1d(s_winner)[has], _EPS)
    np.add.at(out, rival[has], -eta * ratio)
    return out


def hellinger_gaussian(
    mu: np.ndarray, var: np.ndarray, mu_out: np.ndarray, var_out: np.ndarray
) -> np.ndarray:
    """Eq. A.1: Hellinger distance between N(mu, var) and N(mu_out, var_out), elementwise.

    Two zero variances are point masses: distance 0 for equal means, else 1.
    """
    mu, var, mu_out, var_out = (np.asarray(a, dtype=np.float64) for a in (mu, var, mu_out, var_out))
    total = var + var_out
    safe = np.where(total > 0, total, 1.0)
    bc = np.sqrt(2.0 * np.sqrt(var * var_out) / safe) * np.exp(-((mu - mu_out) ** 2) / (4 * safe))
    bc = np.where(total > 0, bc, np.equal(mu, mu_out).astype(np.float64))
    return np.sqrt(np.maximum(1.0 - bc, 0.0))


def _group_sums(labels: np.ndarray, k: int, values: np.ndarray) -> np.ndarray:
    """Per cluster, the column sums of ``values`` (n, d) over its objects: (k, d)."""
    n, d = values.shape
    flat = (labels[:, None] * d + np.arange(d)).ravel()
    return np.bincount(flat, weights=values.ravel(), minlength=k * d).reshape(k, d)


def feature_weights(
    x: np.ndarray,
    labels: np.ndarray,
    centroids: np.ndarray,
    previous: np.ndarray | None = None,
    beta: str = "sqrt",
) -> np.ndarray:
    """Eq. A.1-A.6: feature-cluster weights ``M`` (k, d) from the assignments.

    ``α_jz`` is the Hellinger distance between the Gaussians of feature z inside and outside
    cluster j (Eq. A.1-A.4, variances with ``|C| - 1``, 0 below 2 objects); ``β_jz`` is Eq.
    A.5 (``beta``: see the module docstring); ``m_jz = α_jz β_jz / Σ_t α_jt β_jt``. Rows of
    clusters without objects are taken from ``previous`` (default ``1/d``).
    """
    check_choice("beta", beta, BETAS)
    x = np.asarray(x, dtype=np.float64)
    n, d = x.shape
    k = centroids.shape[0]
    count = np.bincount(labels, minlength=k).astype(np.float64)
    sums = _group_sums(labels, k, x)
    sumsq = _group_sums(labels, k, x * x)
    count_out = n - count
    sums_out = x.sum(axis=0) - sums
    sumsq_out = (x * x).sum(axis=0) - sumsq
    with np.errstate(invalid="ignore", divide="ignore"):
        mu = sums / count[:, None]
        mu_out = sums_out / count_out[:, None]
        var = (sumsq - count[:, None] * mu**2) / (count[:, None] - 1)
        var_out = (sumsq_out - count_out[:, None] * mu_out**2) / (count_out[:, None] - 1)
    var = np.where(count[:, None] >= 2, np.maximum(var, 0.0), 0.0)
    var_out = np.where(count_out[:, None] >= 2, np.maximum(var_out, 0.0), 0.0)
    mu = np.where(count[:, None] > 0, mu, 0.0)
    mu_out = np.where(count_out[:, None] > 0, mu_out, 0.0)
    alpha = hellinger_gaussian(mu, var, mu_out, var_out)
    kernel = _group_sums(labels, k, np.exp(-0.5 * (x - centroids[labels]) ** 2))
    safe_count = np.maximum(count, 1)[:, None]
    beta_v = np.sqrt(kernel) / safe_count if beta == "sqrt" else kernel / safe_count
    product = alpha * beta_v
    total = product.sum(axis=1, keepdims=True)
    weights = np.where(total > 0, product / np.where(total > 0, total, 1.0), 1.0 / d)
    if previous is None:
        previous = np.full((k, d), 1.0 / d)
    return np.where(count[:, None] > 0, weights, previous)


def cluster_means(x: np.ndarray, labels: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """Mean of each cluster's objects; clusters without objects keep ``previous``."""
    k = previous.shape[0]
    count = np.bincount(labels, minlength=k).astype(np.float64)
    sums = _group_sums(labels, k, x)
    return np.where(count[:, None] > 0, sums / np.maximum(count, 1)[:, None], previous)


def _sequential_epoch(
    sim: np.ndarray,
    pen: np.ndarray,
    w_raw: np.ndarray,
    wins: np.ndarray,
    wins_elsewhere: float,
    eta: float,
    offset: float = WEIGHT_OFFSET["paper"],
    score_ratio: bool = False,
    log_factors: np.ndarray | None = None,
) -> np.ndarray:
    """One epoch of Algorithm 1 lines 3-7, object by object, compiled by numba: the same
    arithmetic, in the same order, as :func:`_sequential_epoch_reference` (a test checks
    that both give identical labels and weights), without a Python step per object. The
    loop is inherently sequential (each object sees the weights the previous one left), so
    it cannot be a matrix operation; compiled, Pen-Based Digits' clients take a fraction of
    the time (``docs/fedhire.md``). ``log_factors`` (k,), if given, receives the mean over
    the objects of the ``ln(γ_j w_j)`` each one met."""
    sim = np.ascontiguousarray(sim, dtype=np.float64)
    pen = np.ascontiguousarray(pen, dtype=np.float64)
    weight = sigmoid_weight(w_raw, offset)
    trace = np.zeros(0) if log_factors is None else log_factors
    trace[:] = 0.0
    labels = _sequential_epoch_compiled(
        sim, pen, w_raw, weight, wins, float(wins_elsewhere), eta, offset, score_ratio, trace
    )
    trace /= max(sim.shape[0], 1)
    return labels


@numba.njit(cache=True, nogil=True)
def _sequential_epoch_compiled(
    sim: np.ndarray,
    pen: np.ndarray,
    w_raw: np.ndarray,
    weight: np.ndarray,
    wins: np.ndarray,
    wins_elsewhere: float,
    eta: float,
    offset: float,
    score_ratio: bool,
    trace: np.ndarray,
) -> np.ndarray:
    n, k = sim.shape
    labels = np.empty(n, dtype=np.int64)
    score = np.empty(k, dtype=np.float64)
    total = wins.sum() + wins_elsewhere
    tracing = trace.shape[0] > 0
    for i in range(n):
        v = 0
        for j in range(k):
            gamma = 1.0 - wins[j] / total if total > 0 else 1.0
            score[j] = gamma * weight[j] * sim[i, j]
            if tracing:
                trace[j] += math.log(max(gamma * weight[j], 1e-300))
            if score[j] > score[v]:
                v = j
        labels[i] = v
        r = -1
        if k > 1:
            r = 1 if v == 0 else 0
            for j in range(k):
                if j != v and score[j] > score[r]:
                    r = j
        ratio_of = score if score_ratio else pen[i]
        _reward_and_penalize(w_raw, weight, v, r, ratio_of[r], ratio_of[v], eta, offset)
        wins[v] += 1
        total += 1.0
    return labels


@numba.njit(cache=True, nogil=True)
def _reward_and_penalize(
    w_raw: np.ndarray,
    weight: np.ndarray,
    v: int,
    r: int,
    rival_value: float,
    winner_value: float,
    eta: float,
    offset: float,
) -> None:
    """Eq. 8-9 for one object, in place: the winner ``v``'s raw weight gains ``eta``, the
    rival ``r``'s (``r < 0``: none) loses ``eta * rival_value / winner_value`` (the ratio of
    Eq. 9); Eq. 10 renews both weights. Compiled, so that the sequential epoch's compiled
    loop and its Python reference run the same arithmetic."""
    w_raw[v] += eta
    weight[v] = 1.0 / (1.0 + math.exp(min(-10.0 * w_raw[v] + offset, 700.0)))
    if r >= 0:
        w_raw[r] -= eta * rival_value / max(winner_value, _EPS)
        weight[r] = 1.0 / (1.0 + math.exp(min(-10.0 * w_raw[r] + offset, 700.0)))


def _sequential_epoch_reference(
    sim: np.ndarray,
    pen: np.ndarray,
    w_raw: np.ndarray,
    wins: np.ndarray,
    wins_elsewhere: float,
    eta: float,
    offset: float = WEIGHT_OFFSET["paper"],
    score_ratio: bool = False,
) -> np.ndarray:
    """One epoch of Algorithm 1 lines 3-7, object by object (the update is sequential).

    ``sim`` (n, k) holds the active clusters only, ``pen`` the values whose ratio Eq. 9
    takes (``sim``, or the distances for ``penalty="distance"``; with ``score_ratio`` the
    ratio of the Eq. 4 scores ``γ w s`` instead); ``w_raw`` and ``wins`` (k,)
    are updated in place; ``wins_elsewhere`` is the eliminated clusters' share of Eq. 5's
    ``Σ_t g_t``.
    Returns the winners (the assignments).
    """
    n, k = sim.shape
    labels = np.empty(n, dtype=np.int64)
    weight = sigmoid_weight(w_raw, offset)
    total = float(wins.sum()) + wins_elsewhere
    for i in range(n):
        row = sim[i]
        gamma = 1.0 - wins / total if total > 0 else 1.0
        score = gamma * weight * row
        v = int(np.argmax(score))
        labels[i] = v
        ratio_of = score.copy() if score_ratio else pen[i]
        score[v] = -np.inf
        r = int(np.argmax(score)) if k > 1 else -1
        _reward_and_penalize(w_raw, weight, v, r, ratio_of[r], ratio_of[v], eta, offset)
        wins[v] += 1
        total += 1.0
    return labels


def _batch_epoch(
    sim: np.ndarray,
    pen: np.ndarray,
    w_raw: np.ndarray,
    wins: np.ndarray,
    wins_elsewhere: float,
    eta: float,
    offset: float = WEIGHT_OFFSET["paper"],
    score_ratio: bool = False,
) -> np.ndarray:
    """One epoch with the epoch-start γ and w for every object (``update="batch"``)."""
    total = float(wins.sum()) + wins_elsewhere
    gamma = 1.0 - wins / total if total > 0 else np.ones_like(wins)
    scores = gamma * sigmoid_weight(w_raw, offset) * sim
    winner, rival = winner_and_rival(scores)
    rows = np.arange(sim.shape[0])
    safe_rival = np.maximum(rival, 0)
    ratio_of = scores if score_ratio else pen
    w_raw[:] = reward_and_penalty(
        w_raw, winner, rival, ratio_of[rows, winner], ratio_of[rows, safe_rival], eta
    )
    wins += np.bincount(winner, minlength=wins.shape[0])
    return winner


def competitive_penalized_learning(
    x: np.ndarray,
    rng: np.random.Generator,
    params: CplParams | None = None,
    k0: int | None = None,
    record_factors: bool = False,
) -> CplResult:
    """Algorithm 1 (FCPL; MCPL runs it on the centroids): CPL from ``k0`` random objects.

    Parameters
    ----------
    x : (n, d) objects (float).
    rng : the source of the initial centroids.
    params : :class:`CplParams` (defaults of §4.1).
    k0 : starting number of clusters; default ``initial_k(n, params.k0_ratio)``.
    record_factors : also return the last epoch's mean ``ln(γ w)`` (``log_factors``; one
        more pass over the objects, which changes nothing).

    Returns
    -------
    CplResult
        The surviving clusters (active, with at least one object), renumbered 0..k-1.
    """
    params = params or CplParams()
    # The per-epoch matrices are small (n x k x d, d <= 36): BLAS threads cost more than
    # they gain (Pen-Based Digits, one run: 41 s of CPU with two OpenBLAS threads, 28 s
    # with one, on this 2-core machine).
    with threadpool_limits(limits=1, user_api="blas"):
        return _cpl(x, rng, params, k0, record_factors)


def _cpl(
    x: np.ndarray,
    rng: np.random.Generator,
    params: CplParams,
    k0: int | None,
    record_factors: bool = False,
) -> CplResult:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 1:
        raise ConfigError(f"CPL needs a 2-D array with at least one row, got shape {x.shape}")
    n, d = x.shape
    k0 = initial_k(n, params.k0_ratio) if k0 is None else k0
    if not 1 <= k0 <= n:
        raise ConfigError(f"k0 must be in [1, {n}] (the number of objects), got {k0}")
    centroids = x[rng.choice(n, size=k0, replace=False)].copy()
    m = np.full((k0, d), 1.0 / d)
    offset = WEIGHT_OFFSET[params.weight]
    w_raw = np.full(k0, WEIGHT_START[params.weight])
    wins = np.zeros(k0)
    active = np.ones(k0, dtype=bool)
    epoch_fn = _sequential_epoch if params.update == "sequential" else _batch_epoch
    labels_old: np.ndarray | None = None
    converged = False
    epoch = 0
    while epoch < params.max_epochs:
        epoch += 1
        idx = np.flatnonzero(active)
        dist = weighted_distances(x, centroids[idx], m[idx], params.norm)
        sim = similarity(dist, params.similarity)
        pen = sim if params.penalty == "similarity" else dist
        w_start = w_raw.copy()
        w_act, wins_act = w_raw[idx], wins[idx]
        elsewhere = float(wins.sum() - wins_act.sum())
        score_ratio = params.penalty == "score"
        if record_factors:  # the epoch's inputs, to replay the last one
            last = (idx, sim, pen, w_act.copy(), wins_act.copy(), elsewhere, score_ratio)
        labels = idx[
            epoch_fn(sim, pen, w_act, wins_act, elsewhere, params.eta, offset, score_ratio)
        ]
        w_raw[idx], wins[idx] = w_act, wins_act
        eliminated = active & (sigmoid_weight(w_raw, offset) < params.eliminate_below)
        if eliminated.sum() == active.sum():  # never eliminate the last cluster
            eliminated[np.argmax(np.where(active, w_raw, -np.inf))] = False
        active &= ~eliminated
        unchanged = labels_old is not None and np.array_equal(labels, labels_old)
        labels_old = labels
        centroids = cluster_means(x, labels, centroids)
        losing = bool(np.any((w_raw < w_start) & active))
        if unchanged and not eliminated.any() and (params.stop == "assignments" or not losing):
            converged = True
            break
        m = feature_weights(x, labels, centroids, m, params.beta)
    # Objects of a cluster eliminated in the last (unconverged) epoch still name it: move
    # them to their best active cluster so every label is a surviving cluster.
    stray = ~active[labels_old]
    if stray.any() and active.any():
        idx = np.flatnonzero(active)
        dist = weighted_distances(x[stray], centroids[idx], m[idx], params.norm)
        sim = similarity(dist, params.similarity)
        score = winning_chance(wins)[idx] * sigmoid_weight(w_raw[idx], offset) * sim
        labels_old[stray] = idx[np.argmax(score, axis=1)]
    keep = np.unique(labels_old)
    relabel = np.full(k0, -1, dtype=np.int64)
    relabel[keep] = np.arange(keep.size)
    labels = relabel[labels_old]
    final = cluster_means(x, labels, centroids[keep])
    log_factors = None
    if record_factors:
        log_factors = _last_epoch_log_factors(last, params, offset)
        log_factors = log_factors[np.searchsorted(last[0], keep)]
    return CplResult(labels, final, m[keep], epoch, converged, log_factors)


def _last_epoch_log_factors(last: tuple, params: CplParams, offset: float) -> np.ndarray:
    """The mean ``ln(γ_j w_j)`` the objects of the last epoch met, per cluster active in it:
    the epoch replayed from its inputs ``last`` (sequential), or its start values (batch)."""
    idx, sim, pen, w_act, wins_act, elsewhere, score_ratio = last
    if params.update == "sequential":
        out = np.zeros(idx.size)
        _sequential_epoch(
            sim, pen, w_act, wins_act, elsewhere, params.eta, offset, score_ratio, out
        )
        return out
    total = float(wins_act.sum()) + elsewhere
    gamma = 1.0 - wins_act / total if total > 0 else np.ones_like(wins_act)
    return np.log(np.maximum(gamma * sigmoid_weight(w_act, offset), 1e-300))
