"""AS-CFL's clustering and convergence metrics (Sections 4.1 and 4.4.2).

Paper sentences and how they are read:

* Clustering accuracy against the true groups -- not defined in the paper (its Dirichlet
  label skew and rotations 0/90/180/270 make ground-truth groups for the rotation): the
  adjusted Rand index of scikit-learn (:func:`adjusted_rand_index`).
* Stability -- "cluster stability, defined as the average Jaccard similarity of cluster
  memberships between consecutive communication rounds" (4.4.2). Cluster numbers are not
  stable across rounds (clusters are regrown every round), so memberships are compared as
  sets. Default ``per="client"``: for each client ``i`` present in both rounds,
  ``|A_i ∩ B_i| / |A_i ∪ B_i|`` with ``A_i``, ``B_i`` the members of ``i``'s cluster in the
  two rounds (restricted to the clients present in both), averaged over clients.
  ``per="cluster"``: each cluster of the later round is matched with the earlier cluster of
  largest Jaccard, averaged over the later round's clusters (:func:`membership_jaccard`,
  :func:`run_stability`).
* Convergence speed -- "the number of rounds required to reach 90% peak accuracy" (4.1): the
  first round (1-based) whose accuracy is ``>= 0.9 * max`` over the run
  (:func:`rounds_to_fraction_of_peak`); :func:`rounds_to_accuracy` is the other reading (an
  absolute accuracy of 0.90).

A run's summary of its rounds (:func:`rounds_summary`, :func:`lowrank_uplink`) is read from
its ``metrics.csv`` rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
from sklearn.metrics import adjusted_rand_score

from fedprune import checks
from fedprune.errors import ConfigError

JaccardPer = Literal["client", "cluster"]
JACCARD_PER: tuple[str, ...] = ("client", "cluster")
Membership = Mapping[object, int] | Sequence[int] | np.ndarray


def _labels(values: object, name: str) -> np.ndarray:
    labels = np.asarray(values)
    if labels.ndim != 1 or labels.size == 0:
        raise ConfigError(f"{name} must be a non-empty vector of cluster labels, got {labels!r}")
    return labels


def adjusted_rand_index(labels: object, truth: object) -> float:
    """Adjusted Rand index of the clustering ``labels`` against the true groups ``truth``
    (1: identical partitions, about 0: chance; invariant to renumbering)."""
    a, b = _labels(labels, "labels"), _labels(truth, "truth")
    if a.shape != b.shape:
        raise ConfigError(f"labels ({a.size}) and truth ({b.size}) must cover the same clients")
    return float(adjusted_rand_score(b, a))


def _groups(membership: Membership, name: str) -> dict[object, frozenset]:
    """client -> frozenset of the clients in its cluster."""
    if isinstance(membership, Mapping):
        items = list(membership.items())
    else:
        items = list(enumerate(_labels(membership, name).tolist()))
    if not items:
        raise ConfigError(f"{name} has no clients")
    clusters: dict[object, set] = {}
    for client, label in items:
        clusters.setdefault(label, set()).add(client)
    return {client: frozenset(clusters[label]) for client, label in items}


def _jaccard(a: frozenset, b: frozenset) -> float:
    return len(a & b) / len(a | b)


def membership_jaccard(
    previous: Membership, current: Membership, per: JaccardPer = "client"
) -> float:
    """Section 4.4.2's stability between two rounds (module docstring).

    ``previous`` and ``current`` give each client's cluster label, as a sequence indexed by
    client or a mapping client -> label (clients that took part in one round only are left
    out). Returns a value in [0, 1]; 1 when the partitions are equal.

    >>> membership_jaccard([0, 0, 1, 1], [0, 0, 0, 1])  # (2/3 + 2/3 + 1/4 + 1/2) / 4
    0.5208333333333333
    """
    checks.check_choice("jaccard_per", per, JACCARD_PER)
    before, after = _groups(previous, "previous"), _groups(current, "current")
    common = frozenset(before) & frozenset(after)
    if not common:
        raise ConfigError("previous and current rounds share no client")
    before = {c: g & common for c, g in before.items() if c in common}
    after = {c: g & common for c, g in after.items() if c in common}
    if per == "client":
        return float(np.mean([_jaccard(before[c], after[c]) for c in sorted(common, key=str)]))
    old = set(before.values())
    new = sorted(set(after.values()), key=lambda g: sorted(map(str, g)))
    return float(np.mean([max(_jaccard(g, h) for h in old) for g in new]))


def run_stability(history: Sequence[Membership], per: JaccardPer = "client") -> float:
    """Mean of :func:`membership_jaccard` over consecutive rounds of ``history`` (one
    membership per round, at least two)."""
    if len(history) < 2:
        raise ConfigError(f"stability needs at least 2 rounds of memberships, got {len(history)}")
    return float(
        np.mean([membership_jaccard(a, b, per) for a, b in zip(history[:-1], history[1:])])
    )


def _accuracies(accuracies: object) -> np.ndarray:
    acc = np.asarray(accuracies, dtype=np.float64)
    if acc.ndim != 1 or acc.size == 0 or not np.all(np.isfinite(acc)):
        raise ConfigError(
            f"accuracies must be a non-empty, finite vector (one per round), got {acc!r}"
        )
    if acc.min() < 0 or acc.max() > 1:
        raise ConfigError(f"accuracies must be fractions in [0, 1], got {acc!r}")
    return acc


def rounds_to_accuracy(accuracies: object, target: float) -> int | None:
    """First round (1-based) whose accuracy is ``>= target``; ``None`` if none reaches it."""
    checks.check_range("target_accuracy", target, 0, 1)
    acc = _accuracies(accuracies)
    reached = np.flatnonzero(acc >= target - 1e-12)
    return int(reached[0]) + 1 if reached.size else None


def rounds_to_fraction_of_peak(accuracies: object, fraction: float = 0.9) -> int:
    """Section 4.1 "the number of rounds required to reach 90% peak accuracy": the first
    round (1-based) whose accuracy is ``>= fraction * max(accuracies)``.

    >>> rounds_to_fraction_of_peak([0.2, 0.5, 0.85, 0.9, 0.88])  # 0.9 * 0.9 = 0.81
    3
    """
    checks.check_range("peak_fraction", fraction, 0, 1, low_open=True)
    acc = _accuracies(accuracies)
    return int(rounds_to_accuracy(acc, min(1.0, fraction * float(acc.max()))))


def rounds_summary(rows: Sequence[Mapping], chosen: int | None, params: int) -> dict:
    """What a run's summary says of its rounds, from its ``metrics.csv`` ``rows`` (one per
    round, as read back): the final and peak mean client accuracy, the rounds to 90 % of the
    peak, the last round's clusters (and, with ``--clusters auto``, the K ``chosen`` before
    round 1), its ARI (``None`` without ground-truth groups), the mean stability of rounds 2
    on (1.0 with one round), the MB up and down over all rounds, the model's ``params``
    (the floats of one full update) and the run's wall seconds.

    >>> row = dict(acc="0.5", clusters="2", ari="", stability="1.0", uplink_mb="1.5",
    ...            downlink_mb="0.5", wall_s="3.0")
    >>> rounds_summary([row, {**row, "acc": "0.8"}], None, 10)["rounds_to_90pct_peak"]
    2
    """
    accs = [float(r["acc"]) for r in rows]
    last = rows[-1]
    return {
        "final_acc": accs[-1],
        "peak_acc": max(accs),
        "rounds_to_90pct_peak": rounds_to_fraction_of_peak(accs, 0.9),
        "clusters": int(last["clusters"]),
        **({"clusters_chosen": chosen} if chosen is not None else {}),
        "ari": float(last["ari"]) if last["ari"] != "" else None,
        "mean_stability": float(np.mean([float(r["stability"]) for r in rows[1:]] or [1.0])),
        "uplink_mb": float(sum(float(r["uplink_mb"]) for r in rows)),
        "downlink_mb": float(sum(float(r["downlink_mb"]) for r in rows)),
        "params": params,
        "wall_s": float(last["wall_s"]),
    }


def lowrank_uplink(rows: Sequence[Mapping]) -> dict:
    """``uplink_lowrank_mb``, the MB up over all rounds with the low-rank step, where a round
    of ``rows`` took it (else nothing): the rounds without it (the FedAvg warm-up) upload
    the full update."""
    if not any(r.get("uplink_lowrank_mb") for r in rows):
        return {}
    return {
        "uplink_lowrank_mb": float(
            sum(float(r.get("uplink_lowrank_mb") or r["uplink_mb"]) for r in rows)
        )
    }
