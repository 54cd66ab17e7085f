"""The pipeline's server state between rounds, and its checkpoint form.

In the style of fedjax's ``ServerState``: the global model w (Phase 1, and the proximal anchor
w^(T0) of Eq. 5 afterwards), each client's cluster, each cluster's model w_c and mask M_c
(Eq. 6-7), the communication accounts (Eq. 13 and encoded payload), and with ``--clusters
auto`` how K was chosen (:class:`~fedprune.algorithms.caafp.choose_k.ClusterChoice`). The
checkpoint keys are ``global``, ``assignment``, ``cluster{c}_w``, ``cluster{c}_m``
(accounts as scalars);
a chosen K adds ``cluster_choice``: [K tried (int64), their mean silhouettes (float64),
[threshold, K chosen] (float64)]; the split/merge passes of ``--recluster split-merge`` so far
add ``reclusters`` (:func:`~fedprune.algorithms.pipeline.recluster.events_to_arrays`; absent
before the first pass). Their K is the
number of ``cluster{c}_w`` lists saved (:func:`saved_clusters`). What a checkpoint must be
to be restored into a run is :meth:`PipelineState.schema` (and, for a chosen K,
:meth:`PipelineState.check_chosen`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from fedprune.algorithms.caafp.choose_k import ClusterChoice
from fedprune.algorithms.caafp.communication import CommAccounts
from fedprune.algorithms.pipeline.recluster import (
    ReclusterEvent,
    events_from_arrays,
    events_to_arrays,
)
from fedprune.engine.loop import Schema, UnfitCheckpoint

Weights = list[np.ndarray]


@dataclasses.dataclass
class PipelineState:
    global_w: Weights
    accounts: CommAccounts
    assignment: np.ndarray | None = None  # cluster of each client, in sorted client-id order
    cluster_w: dict[int, Weights] = dataclasses.field(default_factory=dict)
    cluster_m: dict[int, Weights] = dataclasses.field(default_factory=dict)
    choice: ClusterChoice | None = None  # how K was chosen (--clusters auto)
    # the split/merge passes so far (--recluster split-merge), in order
    reclusters: list[ReclusterEvent] = dataclasses.field(default_factory=list)

    @property
    def clusters(self) -> int:
        """K: the number of clusters formed (0 before the clustering step)."""
        return len(self.cluster_w)

    def to_checkpoint(self) -> tuple[dict[str, Weights], dict[str, float]]:
        arrays: dict[str, Weights] = {"global": self.global_w}
        if self.assignment is not None:
            arrays["assignment"] = [self.assignment]
            for c in sorted(self.cluster_w):
                arrays[f"cluster{c}_w"] = self.cluster_w[c]
                arrays[f"cluster{c}_m"] = self.cluster_m[c]
        if self.choice is not None:
            arrays["cluster_choice"] = self.choice.to_arrays()
        if self.reclusters:
            arrays["reclusters"] = events_to_arrays(self.reclusters, len(self.assignment))
        return arrays, self.accounts.scalars()

    @classmethod
    def from_checkpoint(
        cls,
        arrays: dict[str, Weights],
        scalars: dict[str, float],
        clusters: int | None,
        accounts: Callable[[dict[str, float]], CommAccounts],
    ) -> PipelineState:
        """The state ``to_checkpoint`` saved; ``clusters``: K, or ``None`` where the run chose
        K (``--clusters auto``) or may change it (``--recluster split-merge``): then K is the
        checkpoint's (:func:`saved_clusters`)."""
        state = cls(arrays["global"], accounts(scalars))
        if "assignment" in arrays:
            state.assignment = arrays["assignment"][0]
            k = saved_clusters(arrays) if clusters is None else clusters
            for c in range(k):
                state.cluster_w[c] = arrays[f"cluster{c}_w"]
                state.cluster_m[c] = arrays[f"cluster{c}_m"]
        if "cluster_choice" in arrays:
            state.choice = ClusterChoice.from_arrays(arrays["cluster_choice"])
        if "reclusters" in arrays:
            state.reclusters = events_from_arrays(arrays["reclusters"])
        return state

    @staticmethod
    def schema(
        arrays: Mapping[str, Sequence[np.ndarray]],
        model: Sequence[tuple[int, ...]],
        num_clients: int,
        clusters: int,
        max_clusters: int,
        choosing_from: int | None = None,
    ) -> Schema:
        """What a checkpoint's ``arrays`` must hold for a run of this ``model`` (each trainable
        weight's shape) on ``num_clients`` clients with ``clusters`` clusters (K: the run's, or
        the checkpoint's own where the run chose or changes it): the global model, one cluster
        number below K per client, K models and masks; where the run chose K from
        ``choosing_from`` clients (``--clusters auto``, at most ``max_clusters``) the
        choice's three arrays (K tried, their silhouettes, [threshold, K chosen]); the
        split/merge passes' five arrays each as long as the passes."""
        model = list(model)
        shapes: dict[str, list[tuple[int, ...]]] = {
            "global": model,
            "assignment": [(num_clients,)],
        }
        if "assignment" in arrays:
            for c in range(clusters):
                shapes[f"cluster{c}_w"] = shapes[f"cluster{c}_m"] = model
        if choosing_from is not None:
            tried = min(max_clusters, choosing_from - 1) - 1
            shapes["cluster_choice"] = [(tried,), (tried,), (2,)]
        if "reclusters" in arrays and arrays["reclusters"]:
            p, n = len(arrays["reclusters"][0]), num_clients
            shapes["reclusters"] = [(p,), (p, n), (p, n), (p, n), (p,)]
        return Schema(shapes, {"assignment": clusters})

    def check_chosen(self, max_clusters: int) -> None:
        """A restored state of a run that chose K (``--clusters auto``): the K its clusters
        started with is the one its choice records, and within ``max_clusters``; else
        :class:`~fedprune.engine.loop.UnfitCheckpoint`."""
        if self.assignment is None:
            return
        k = self.reclusters[0].k_before if self.reclusters else self.clusters
        if self.choice is None or self.choice.chosen != k or k > max_clusters:
            raise UnfitCheckpoint(
                f"does not fit this run (its {k} clusters are not the ones chosen with "
                f"--max-clusters {max_clusters})"
            )

    def cluster_record(self, chosen: bool, reclustered: bool) -> dict:
        """``summary.json``'s record of the clusters: each one's number of clients
        (``clusters``); where the run chose K (``chosen``: ``--clusters auto``) that K
        (``clusters_chosen``); where it split and merged them (``reclustered``: ``--recluster
        split-merge``) :meth:`recluster_record`."""
        return {
            "clusters": {str(c): int(np.sum(self.assignment == c)) for c in range(self.clusters)},
            **({"clusters_chosen": self.clusters} if chosen else {}),
            **(self.recluster_record() if reclustered else {}),
        }

    def recluster_record(self) -> dict:
        """``summary.json``'s record of ``--recluster split-merge``: K after the clustering
        step (``clusters_initial``) and at the end (``clusters_final``), how many passes ran
        and how many changed the clusters (``reclusters.json`` has each)."""
        events = self.reclusters
        return {
            "clusters_initial": events[0].k_before if events else self.clusters,
            "clusters_final": self.clusters,
            "recluster_passes": len(events),
            "recluster_changes": sum(1 for e in events if (e.splits() or e.merges())),
        }

    def cluster_of(self, ids: list[int]) -> dict[int, int]:
        """Client id -> cluster (``ids`` in the order of :attr:`assignment`)."""
        assert self.assignment is not None
        return dict(zip(ids, self.assignment.tolist()))


def saved_clusters(arrays: Mapping[str, Sequence[np.ndarray]]) -> int:
    """K of a checkpoint's arrays: how many ``cluster{c}_w`` lists it holds."""
    return sum(1 for name in arrays if re.fullmatch(r"cluster\d+_w", name))
