"""AS-CFL Sections 3.2.1-3.2.2 / Algorithm 1 line 16: initial clustering by the positive
incentive mechanism, grown greedily from representative seeds.

The module is pure: the accuracy of a tentative cluster model comes from a callable
``evaluate(member_ids) -> accuracy`` that the caller implements ("The temporary aggregate
model is created using a single weighted average, eliminating the need for retraining", 3.2.1:
the data-size weighted average of the members' local models, evaluated on the server's proxy
set). ``member_ids`` is a tuple of client indices, seed first, then in admission order.

Paper sentences and how they are read:

* Admission -- "A client is assigned to cluster k if its inclusion improves the cluster's
  model performance on a validation set" (3.2.1) and "the search stops at the first client
  that fails to improve accuracy by 3%" (3.2.1). Default ``rule="absolute_gain"``: admit
  client ``i`` when ``acc(members + i) - acc(members) >= gain`` with ``gain = 0.03``
  (percentage points: the paper writes its 0.915 -> 0.921 change as "this tiny 0.6% accuracy
  gain", 4.3). ``"relative_gain"``: ``acc(members + i) >= (1 + gain) acc(members)``.
* θ -- "The positive incentive threshold θ is a key hyperparameter that determines whether a
  client is admitted into a cluster based on its performance contribution" with θ = 0.85
  best (4.4.2). A gain of 0.85 is impossible, so θ must be on another scale. Two readings are
  offered: ``"accuracy_floor"``: admit when ``acc(members + i) >= θ`` and the accuracy
  improves; ``"similarity_gate"``: admit when the mean cosine similarity of ``i`` to the
  members is ``>= θ`` and the accuracy improves (4.4.2: a low θ is "allowing clients with
  dissimilar data to join clusters").
* Candidates -- "for each candidate cluster, only the top 20% most similar clients are
  evaluated" (3.2.1): the ``ceil(0.2 N)`` not-yet-assigned clients most similar to the seed
  (``candidate_base="all"``, ``N`` = all clients; ``"unassigned"``: 20% of the clients still
  unassigned), in decreasing similarity (ties: lower index first), at least one while any
  client is left.
* Stop -- "the search stops at the first client that fails" (3.2.1), default; with
  ``stop_at_first_failure=False`` every candidate is tried once and each one that passes is
  admitted ("it is expanded with the greedy incentive test until no more positives are
  found", 3.2.2 (ii)).
* Seeds -- "a representativeness score is computed for each unassigned client (data-size
  weighted centrality)" and "the highest-scoring client is selected as the seed ... this
  process is repeated until all the clients are assigned" (3.2.2): centrality of ``i`` is
  its mean affinity ``(1 + S_ij) / 2`` (a cosine moved to [0, 1], so a larger weight never
  lowers a score) to the other unassigned clients; ``seed_score="own_size"`` multiplies it
  by ``i``'s data size, ``"neighbour_size"`` weights each neighbour's affinity by that
  neighbour's data size instead. Ties: lower index.
* A client that no cluster admits stays alone (its own cluster): "reducing the inclusion of
  outliers or clients with divergent data distributions" (3.2.1).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np

from fedprune import checks
from fedprune.algorithms.ascfl._arrays import similarity_matrix, weights_from_sizes
from fedprune.errors import ConfigError

AdmissionRule = Literal[
    "absolute_gain", "relative_gain", "accuracy_floor", "similarity_gate", "retained_ratio"
]
ADMISSION_RULES: tuple[str, ...] = (
    "absolute_gain",
    "relative_gain",
    "accuracy_floor",
    "similarity_gate",
    "retained_ratio",
)
CandidateBase = Literal["all", "unassigned"]
CANDIDATE_BASES: tuple[str, ...] = ("all", "unassigned")
SeedScore = Literal["own_size", "neighbour_size"]
SEED_SCORES: tuple[str, ...] = ("own_size", "neighbour_size")
Evaluate = Callable[[tuple[int, ...]], float]

# accuracies are fractions k/m of a proxy set: 0.73 - 0.70 is 0.0299999... in floating point
_TOLERANCE = 1e-9


def check_rule(rule: str, gain: float, theta: float) -> None:
    """The admission rule and its thresholds (``ConfigError`` naming the parameter)."""
    checks.check_choice("admission_rule", rule, ADMISSION_RULES)
    checks.check_range("incentive_gain", gain, 0, 1)
    checks.check_range("incentive_theta", theta, 0, 1)


def admits(
    rule: AdmissionRule,
    current: float,
    candidate: float,
    *,
    gain: float = 0.03,
    theta: float = 0.85,
    similarity: float | None = None,
) -> bool:
    """Section 3.2.1's incentive test: is a client admitted when the cluster model's proxy
    accuracy goes from ``current`` to ``candidate`` by its inclusion?

    ``similarity`` (the candidate's mean cosine similarity to the members) is needed by
    ``"similarity_gate"`` only. See the module docstring for the five rules.

    >>> admits("absolute_gain", 0.70, 0.73)  # +3 points
    True
    >>> admits("relative_gain", 0.70, 0.72)  # 0.72 < 1.03 * 0.70 = 0.721
    False
    >>> admits("retained_ratio", 0.80, 0.69)  # 0.69 >= 0.85 * 0.80 = 0.68
    True
    """
    check_rule(rule, gain, theta)
    if rule == "absolute_gain":
        return candidate - current >= gain - _TOLERANCE
    if rule == "relative_gain":
        return candidate >= (1 + gain) * current - _TOLERANCE
    if rule == "retained_ratio":
        return candidate >= theta * current - _TOLERANCE
    improves = candidate > current + _TOLERANCE
    if rule == "accuracy_floor":
        return improves and candidate >= theta - _TOLERANCE
    if similarity is None:
        raise ConfigError("admission_rule similarity_gate needs the candidate's similarity")
    return improves and similarity >= theta - _TOLERANCE


def representativeness(
    similarity: object,
    data_sizes: object,
    pool: Sequence[int],
    weighting: SeedScore = "own_size",
) -> np.ndarray:
    """Section 3.2.2 (i): "data-size weighted centrality" of each client of ``pool`` (the
    unassigned clients) among the others of ``pool``; one score per entry of ``pool``.

    ``"own_size"``: ``n_i * mean_j (1 + S_ij) / 2``; ``"neighbour_size"``:
    ``sum_j n_j (1 + S_ij) / 2 / sum_j n_j`` (``j`` over ``pool`` without ``i``). A pool of one
    client scores its data size (own) or 1 (neighbour).
    """
    s = similarity_matrix(similarity)
    weights_from_sizes(data_sizes, len(s))  # checks them
    sizes = np.ones(len(s)) if data_sizes is None else np.asarray(data_sizes, dtype=np.float64)
    checks.check_choice("seed_score", weighting, SEED_SCORES)
    idx = np.asarray(pool, dtype=np.int64)
    if idx.size == 0:
        raise ConfigError("representativeness needs at least one unassigned client")
    affinity = (1 + s[np.ix_(idx, idx)]) / 2
    np.fill_diagonal(affinity, 0.0)
    m = len(idx)
    if weighting == "own_size":
        centrality = affinity.sum(axis=1) / (m - 1) if m > 1 else np.ones(1)
        return sizes[idx] * centrality
    if m == 1:
        return np.ones(1)
    others = sizes[idx]
    return (affinity @ others) / (others.sum() - others)


def candidate_count(
    n_clients: int, n_available: int, fraction: float = 0.2, base: CandidateBase = "all"
) -> int:
    """Section 3.2.1 "only the top 20% most similar clients are evaluated": how many.

    ``ceil(fraction * N)`` with ``N = n_clients`` (``base="all"``) or ``N = n_available``
    (``"unassigned"``), at least 1 and at most ``n_available`` (the unassigned clients other
    than the seed).

    >>> candidate_count(20, 19), candidate_count(20, 3), candidate_count(20, 3, base="unassigned")
    (4, 3, 1)
    """
    checks.check_range("candidate_fraction", fraction, 0, 1, low_open=True)
    checks.check_choice("candidate_base", base, CANDIDATE_BASES)
    if n_available <= 0:
        return 0
    size = n_clients if base == "all" else n_available
    # 0.2 * 15 is 3.0000000000000004: round before ceil
    return min(n_available, max(1, math.ceil(round(fraction * size, 9))))


def most_similar(
    similarity: np.ndarray, seed: int, available: Sequence[int], count: int
) -> list[int]:
    """The ``count`` clients of ``available`` most similar to ``seed`` (ties: lower index)."""
    ranked = sorted(available, key=lambda j: (-similarity[seed, j], j))
    return [int(j) for j in ranked[:count]]


@dataclasses.dataclass(frozen=True)
class Trial:
    """One incentive test: ``client``'s inclusion gives ``accuracy``; ``similarity`` is its
    mean cosine similarity to the members before the test."""

    client: int
    accuracy: float
    similarity: float
    admitted: bool


@dataclasses.dataclass(frozen=True)
class GrownCluster:
    """A cluster grown from ``members[0]`` (the seed); ``accuracy`` is the final members'
    model's proxy accuracy, ``trials`` every test in order."""

    members: tuple[int, ...]
    accuracy: float
    seed_accuracy: float
    trials: tuple[Trial, ...]

    @property
    def evaluations(self) -> int:
        """Forward passes over the proxy set spent on this cluster."""
        return 1 + len(self.trials)


def _accuracy(evaluate: Evaluate, members: tuple[int, ...]) -> float:
    value = evaluate(members)
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating):
        raise ConfigError(f"evaluate{members} returned {value!r}; it must return a number")
    if not math.isfinite(value) or not 0 <= value <= 1:
        raise ConfigError(
            f"evaluate{members} returned {value!r}; it must return an accuracy in [0, 1]"
        )
    return float(value)


def grow_cluster(
    seed: int,
    candidates: Sequence[int],
    evaluate: Evaluate,
    similarity: object,
    *,
    rule: AdmissionRule = "absolute_gain",
    gain: float = 0.03,
    theta: float = 0.85,
    stop_at_first_failure: bool = True,
) -> GrownCluster:
    """Section 3.2.2 (ii): expand ``seed`` with the greedy incentive test over ``candidates``
    (already ranked, most similar first); "the search stops at the first client that fails to
    improve accuracy by 3%" (3.2.1) unless ``stop_at_first_failure`` is false.

    ``evaluate`` is called once for the seed alone and once per tried candidate, with the
    members so far plus the candidate.
    """
    check_rule(rule, gain, theta)
    s = similarity_matrix(similarity)
    n = len(s)
    ids = [seed, *candidates]
    if len(set(ids)) != len(ids) or any(not 0 <= i < n for i in ids):
        raise ConfigError(
            f"seed {seed} and candidates {list(candidates)} must be distinct "
            f"client indices in [0, {n})"
        )
    members = [seed]
    current = seed_accuracy = _accuracy(evaluate, (seed,))
    trials = []
    for c in candidates:
        sim = float(s[c, members].mean())
        acc = _accuracy(evaluate, (*members, c))
        ok = admits(rule, current, acc, gain=gain, theta=theta, similarity=sim)
        trials.append(Trial(int(c), acc, sim, ok))
        if ok:
            members.append(int(c))
            current = acc
        elif stop_at_first_failure:
            break
    return GrownCluster(tuple(members), current, seed_accuracy, tuple(trials))


@dataclasses.dataclass(frozen=True)
class IncentiveClustering:
    """Result of :func:`incentive_clustering`: ``labels[i]`` is client ``i``'s cluster
    (numbered in the order the clusters were grown), ``clusters`` the grown clusters."""

    labels: np.ndarray
    clusters: tuple[GrownCluster, ...]

    @property
    def evaluations(self) -> int:
        """Forward passes over the proxy set for the whole clustering (O(S), 3.2.1)."""
        return sum(c.evaluations for c in self.clusters)


def incentive_clustering(
    similarity: object,
    data_sizes: object,
    evaluate: Evaluate,
    *,
    rule: AdmissionRule = "absolute_gain",
    gain: float = 0.03,
    theta: float = 0.85,
    candidate_fraction: float = 0.2,
    candidate_base: CandidateBase = "all",
    stop_at_first_failure: bool = True,
    seed_score: SeedScore = "own_size",
) -> IncentiveClustering:
    """Section 3.2.2 "Initial cluster generation" / Algorithm 1 line 16: repeat (i) score the
    unassigned clients, (ii) grow a cluster from the highest-scoring one over its most
    similar unassigned candidates, until every client is assigned; the number of clusters
    is whatever results ("Thus, the initial K is data-driven and requires no preset value").

    Parameters
    ----------
    similarity
        ``(clients, clients)`` cosine similarities (:mod:`.similarity`).
    data_sizes
        Local dataset sizes (the representativeness weights), or ``None`` for equal sizes.
    evaluate
        ``evaluate(member_ids) -> accuracy`` of the data-size weighted average of those
        clients' models on the proxy set.
    rule, gain, theta, candidate_fraction, candidate_base, stop_at_first_failure, seed_score
        See the module docstring; defaults are the readings chosen there.
    """
    check_rule(rule, gain, theta)
    s = similarity_matrix(similarity)
    n = len(s)
    weights_from_sizes(data_sizes, n)  # checked here, before any evaluation
    candidate_count(n, 1, candidate_fraction, candidate_base)
    labels = np.full(n, -1, dtype=np.int64)
    clusters = []
    while (labels < 0).any():
        pool = [int(i) for i in np.flatnonzero(labels < 0)]
        scores = representativeness(s, data_sizes, pool, seed_score)
        seed = pool[int(np.argmax(scores))]
        available = [i for i in pool if i != seed]
        count = candidate_count(n, len(available), candidate_fraction, candidate_base)
        grown = grow_cluster(
            seed,
            most_similar(s, seed, available, count),
            evaluate,
            s,
            rule=rule,
            gain=gain,
            theta=theta,
            stop_at_first_failure=stop_at_first_failure,
        )
        labels[list(grown.members)] = len(clusters)
        clusters.append(grown)
    return IncentiveClustering(labels, tuple(clusters))
