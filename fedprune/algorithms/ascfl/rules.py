"""AS-CFL and the baselines the paper compares it with (§4.1), each a rule of the shared
clustered round (:class:`.compose.ClusterRule`), built from its own configuration
(:func:`rule_of`; a run's, with ``--clusters auto`` on the start the one-shot pass chose:
:func:`started_rule`):

* :class:`ASCFLRule` -- AS-CFL (Algorithm 1): the clients' update similarity (low-rank),
  clusters grown by the positive incentive (Stage 1), EM and split/merge by ``G_k``
  (Stage 2), (noisy) aggregation; its warm-up, late clients and per-client epochs;
* :class:`CFLRule` -- CFL: recursive bipartition;
* :class:`CFLFixedRule` -- CFL with a fixed K: spherical k-means every round;
* :class:`IFCARule` -- IFCA: K models, each client trains the one with the lowest loss;
* :class:`FedAvgRule` -- FedAvg: one model (IFCA's configuration with K = 1).

Interpretations, beyond those of the package (``fedprune/algorithms/ascfl/__init__.py``) and
of the server's steps (:mod:`.server`):

* **When Stage 1 runs** (``--stage1``). Algorithm 1 puts Stage 1 (line 16, "Perform
  initial greedy clustering ... to form initial clusters") inside the round loop
  (``every_round``). Its name, §3.2's title ("Initial Clustering with Adaptive
  Similarity") and "Thus, the initial K is data-driven" (§3.2.2) also read as clusters
  formed *once* and then adjusted: ``first_round`` (default) runs the incentive in the first
  round after the warm-up only; in every later round Stage 2 (EM, then split/merge) starts
  from the previous round's clusters, on that round's updates. Clients that did not report
  before start in the cluster they were given (cluster 0 in round 1).
* **w/o dynamic adjustment** (``--without adjustment``): no EM and no split/merge (the
  incentive's clusters are final).
* **The warm-up** (``--warmup-rounds W``; interpretation 26 in
  :mod:`fedprune.algorithms.ascfl`): rounds 1..W average one model over all reporting clients
  (FedAvg's rule) and Stage 1 first runs in round W + 1.
* **CFL** (Sattler et al.): one cluster at the start; in every round each cluster with at
  least ``min_size`` members is split in two (optimal bipartition of the cosine similarity)
  when its weighted mean update norm is below ε1 and its largest update norm above ε2.
  **CFL with a fixed K** (the AS-CFL paper's baseline reading): every round, spherical
  k-means with K clusters on the updates. **IFCA**: K models; each client trains the one
  with the lowest loss on its training data; a model is the weighted average of its
  choosers' local models (model averaging), and a model nobody chose stays as it was.
  **FedAvg**: one model.
* **``--clusters auto``** (CFL with a fixed K, IFCA; :mod:`.auto_clusters`): a one-shot pass
  before round 1 chooses K and the first clusters (``from_cut``). CFL with a fixed K takes the
  chosen K in every round's k-means and starts from the cut with K copies of the initial
  model; IFCA's K models all start as the initial model and round 1 trains the cut instead of
  the lowest-loss pick.
* **Late clients** (``--late-clients``; the paper is silent: under Algorithm 1 every round
  re-forms the clusters). With clusters formed once (``--stage1 first_round``), a client
  absent from that round has no update to be clustered by; it is first put where the
  members of its old (warm-up) cluster went, and Stage 2 starts from the labels the clients
  trained in, so it would stay there for good (measured: with 10 % dropout, 1-2 clients per
  seed in another rotation's cluster, ARI 0.72-0.86 to the end). ``lowest_loss`` (default):
  when it next reports, it receives every cluster's model once and joins the one with the
  lowest loss on its training data (the rule IFCA's clients choose by), then trains that
  model; the downlink counts the extra models. ``follow``: it stays.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from fedprune.algorithms.ascfl import auto_clusters, cfl, server, similarity, split_merge
from fedprune.algorithms.ascfl.auto_clusters import ChosenStart
from fedprune.algorithms.ascfl.compose import (
    MB,
    Choice,
    ClusterRule,
    ClusterState,
    Losses,
    Regrouped,
    RoundUpdates,
    full_traffic,
)
from fedprune.configs.ascfl import CFLConfig, CFLFixedConfig, ClusteredImageConfig, IFCAConfig
from fedprune.configs.har import AUTO
from fedprune.data.rotated_partition import RotatedFederatedData
from fedprune.models.spec import ModelSpec
from fedprune.runs import RunDir

Weights = list[np.ndarray]


@dataclasses.dataclass(frozen=True)
class _Rule:
    """What the rules share: one model at the start; every reporting client trains its
    cluster's model for ``config.local_epochs`` epochs; the clusters are numbered anew each
    round (a client that did not report follows its cluster); a new cluster's model is the
    (noisy) aggregate of its members (:func:`.server.aggregate`); full updates up, one
    model down per client."""

    config: ClusteredImageConfig
    spec: ModelSpec

    @classmethod
    def of(cls, config: ClusteredImageConfig, spec: ModelSpec) -> ClusterRule:
        return cls(config, spec)

    @property
    def slots(self) -> int:
        return self.config.num_clients  # at most one cluster per client

    @property
    def uses_losses(self) -> bool:
        return False

    @property
    def per_client_epochs(self) -> bool:
        return False

    @property
    def absent_follow_renumbering(self) -> bool:
        return True

    @functools.cached_property
    def shapes(self) -> list[tuple[int, ...]]:
        """The shapes of the model's trainable weight tensors."""
        return [tuple(w.shape) for w in self.spec.initial_weights().trainable]

    @property
    def params(self) -> int:
        """Trainable parameters of the model (floats of one full update)."""
        return sum(math.prod(shape) for shape in self.shapes)

    def initial_models(self) -> list[Weights]:
        return [list(self.spec.initial_weights().trainable)]

    def epochs(self, examples: Sequence[int]) -> list[int] | None:
        return None

    def choose(self, t: int, state: ClusterState, ids: np.ndarray, losses: Losses) -> Choice:
        return Choice(state.cluster_of.copy(), ids[:0], state.late)

    def late_after(self, t: int, ids: np.ndarray, late: np.ndarray | None) -> np.ndarray | None:
        return late

    def traffic(
        self, reporting: int, received_every_model: int, k: int, rank: int | None
    ) -> dict[str, float | str]:
        return full_traffic(self.params, reporting, received_every_model, k)

    def _models(self, labels: np.ndarray, round_: RoundUpdates) -> list[Weights]:
        """Each cluster of ``labels`` aggregated, in the order of the labels."""
        config = self.config
        return server.aggregate(
            labels,
            round_.starts,
            round_.got,
            config.clip_norm,
            config.noise_multiplier,
            round_.rng,
        )

    def _aggregated(self, labels: np.ndarray, round_: RoundUpdates, **found: object) -> Regrouped:
        """Each cluster of ``labels`` aggregated; the clusters numbered 0..K-1 in the order
        of their labels; ``found``: what the clustering found (:class:`.compose.Regrouped`)."""
        order = {k: i for i, k in enumerate(sorted(set(labels.tolist())))}
        ids = round_.got.client_ids
        cluster_of = {cid: order[int(k)] for cid, k in zip(ids, labels)}
        return Regrouped(self._models(labels, round_), cluster_of, **found)


def _copies(model: Weights, k: int) -> list[Weights]:
    """``k`` copies of ``model`` (arrays copied: no two clusters share a tensor)."""
    return [[np.array(w, copy=True) for w in model] for _ in range(k)]


@dataclasses.dataclass(frozen=True)
class FedAvgRule(_Rule):
    """FedAvg: one model, the weighted average of the reporting clients' local models."""

    def regroup(self, round_: RoundUpdates) -> Regrouped:
        return self._aggregated(np.zeros(len(round_.got.client_ids), dtype=np.int64), round_)


@dataclasses.dataclass(frozen=True)
class CFLRule(_Rule):
    """CFL (Sattler et al.; the module text): each round, every cluster of at least
    ``min_size`` clients that meets the split criterion (``--eps1``, ``--eps2``) is split in
    two by the cosine similarity of its members' updates."""

    min_size: int = 2

    def regroup(self, round_: RoundUpdates) -> Regrouped:
        labels = server.cfl_labels(
            np.stack([server.flatten(u) for u in round_.got.updates]),
            round_.sizes,
            round_.trained_in,
            round_.got.client_ids,
            self.config.eps1,
            self.config.eps2,
            self.min_size,
        )
        return self._aggregated(labels, round_)


@dataclasses.dataclass(frozen=True)
class CFLFixedRule(_Rule):
    """CFL with a fixed K (the AS-CFL paper's baseline reading): every round, spherical
    k-means with ``--clusters`` K on the reporting clients' updates (fewer when fewer
    clients report). ``from_cut`` (``--clusters auto``, :mod:`.auto_clusters`): K is the
    chosen one and the run starts from the one-shot pass's clusters, every cluster's model
    the initial model."""

    from_cut: bool = False

    def initial_models(self) -> list[Weights]:
        """One model; with ``from_cut`` K copies of it, one per cluster of the cut (round 1
        then trains exactly as from one model: every client starts from the same weights)."""
        if not self.from_cut:
            return super().initial_models()
        return _copies(super().initial_models()[0], self.config.clusters)

    def regroup(self, round_: RoundUpdates) -> Regrouped:
        flat = np.stack([server.flatten(u) for u in round_.got.updates])
        k = min(self.config.clusters, len(flat))
        seed = int(round_.rng.integers(2**31 - 1))
        labels = np.asarray(cfl.fixed_k_clusters(flat, k, seed=seed), dtype=np.int64)
        return self._aggregated(labels, round_)


@dataclasses.dataclass(frozen=True)
class IFCARule(_Rule):
    """IFCA: ``--clusters`` K models from K seeds (the paper's "random initialization" of
    each model); each reporting client receives all K, trains the one with the lowest loss
    on its training data, and a model is aggregated over the clients that chose it. The
    models keep their places: a model nobody chose stays as it was, and a client that did
    not report keeps its model's index. ``from_cut`` (``--clusters auto``,
    :mod:`.auto_clusters`): the K models all start as the initial model, and in round 1
    every client trains the model of its cluster in the one-shot pass's cut instead of
    choosing by its loss (the module text of :mod:`.auto_clusters`)."""

    from_cut: bool = False

    @classmethod
    def of(cls, config: ClusteredImageConfig, spec: ModelSpec) -> ClusterRule:
        """IFCA's rule, or FedAvg's for K = 1 (one model: nothing to choose)."""
        return FedAvgRule(config, spec) if config.clusters == 1 else cls(config, spec)

    @property
    def slots(self) -> int:
        return self.config.clusters

    @property
    def uses_losses(self) -> bool:
        return True

    @property
    def absent_follow_renumbering(self) -> bool:
        return False

    def initial_models(self) -> list[Weights]:
        if self.from_cut:  # K copies of the model the one-shot pass started from
            return _copies(super().initial_models()[0], self.config.clusters)
        return [
            list(
                dataclasses.replace(self.spec, seed=self.config.seed * 1000 + k)
                .initial_weights()
                .trainable
            )
            for k in range(self.config.clusters)
        ]

    def choose(self, t: int, state: ClusterState, ids: np.ndarray, losses: Losses) -> Choice:
        cluster_of = state.cluster_of.copy()
        if self.from_cut and t == 1:  # the cut is the first assignment; no model sent extra
            return Choice(cluster_of, ids[:0], state.late)
        if len(state.models) > 1:
            cluster_of[ids] = np.argmin(losses(ids), axis=1)
        return Choice(cluster_of, ids, state.late)

    def regroup(self, round_: RoundUpdates) -> Regrouped:
        labels = round_.trained_in  # the clients chose their model before training
        kept = [list(m) for m in round_.models]
        for k, model in zip(sorted(set(labels.tolist())), self._models(labels, round_)):
            kept[k] = model
        return Regrouped(kept, {cid: int(k) for cid, k in zip(round_.got.client_ids, labels)})


def local_epochs(config: ClusteredImageConfig, examples: int) -> int:
    """AS-CFL's local epochs of a client with ``examples`` training examples (§3.2.3, "the
    ceiling of the batch size divided by the local data size", with Algorithm 1 line 7's
    minimum): E_i = max(E, ceil(BS / n_i)). Reading: the minimum is ``--local-epochs`` (the
    paper's 10 at ``--scale paper``), so only a client with fewer examples than a batch
    trains more than E epochs."""
    return max(int(config.local_epochs), -(-int(config.batch_size) // max(int(examples), 1)))


def head_layers(spec: ModelSpec, layers: str) -> list[tf.keras.layers.Layer]:
    """The layers whose updates the low-rank step factorizes (interpretation 2 in
    :mod:`fedprune.algorithms.ascfl`, "weights near the output layer"): the output layer
    (``layers="output"``), or every Dense layer after the last layer with weights that is not
    Dense (``"dense_head"``: the classifier on top of the convolutions)."""
    weighted = [layer for layer in spec.keras().layers if layer.trainable_weights]
    if layers == "output":
        return weighted[-1:]
    dense = itertools.takewhile(lambda x: isinstance(x, tf.keras.layers.Dense), weighted[::-1])
    return list(dense)[::-1]


def low_rank_tensors(spec: ModelSpec, layers: str) -> int:
    """How many trailing weight tensors (kernels and biases) of ``spec``'s model the low-rank
    step factorizes."""
    return sum(len(layer.trainable_weights) for layer in head_layers(spec, layers))


@dataclasses.dataclass(frozen=True)
class ASCFLRule(_Rule):
    """AS-CFL (Algorithm 1; the module text): after ``--warmup-rounds`` rounds of FedAvg,
    the similarity of the updates (§3.2.1-3.2.2, low-rank on the ``low_rank_tensors``
    trailing weight tensors), Stage 1's clusters grown by the positive incentive (line 16;
    every round or once, ``--stage1``), Stage 2's EM and split/merge by ``G_k`` (lines
    17-24), and the (noisy) aggregation within the clusters (lines 25-36). ``--without``
    leaves one component out (§4.3). :meth:`of` counts the tensors on the run's model."""

    low_rank_tensors: int = 2  # the output kernel and bias

    @classmethod
    def of(cls, config: ClusteredImageConfig, spec: ModelSpec) -> ClusterRule:
        return cls(config, spec, low_rank_tensors(spec, config.low_rank_layers))

    @property
    def positive_incentive(self) -> bool:
        return self.config.without != "incentive"

    @property
    def adjustment(self) -> bool:
        return self.config.without != "adjustment"

    @property
    def low_rank(self) -> bool:
        return self.config.without != "low-rank"

    @property
    def places_late_clients(self) -> bool:
        """Whether a client absent when Stage 1 formed the clusters joins the one whose model
        has the lowest loss on its data when it next reports (``--late-clients``)."""
        return self.config.has_late_clients and self.config.late_clients == "lowest_loss"

    @property
    def uses_losses(self) -> bool:
        return self.places_late_clients

    @property
    def per_client_epochs(self) -> bool:
        return self.config.epochs_rule == "data_size"

    def epochs(self, examples: Sequence[int]) -> list[int] | None:
        if not self.per_client_epochs:
            return None
        return [local_epochs(self.config, n) for n in examples]

    def choose(self, t: int, state: ClusterState, ids: np.ndarray, losses: Losses) -> Choice:
        """Every client trains its cluster's model; a late client (the module text) first
        receives every cluster's model and joins the one with the lowest loss."""
        cluster_of = state.cluster_of.copy()
        late = state.late.copy() if state.late is not None else None
        placing = self.places_late_clients and late is not None and len(state.models) > 1
        placed = ids[late[ids]] if placing else ids[:0]
        if len(placed):
            cluster_of[placed] = np.argmin(losses(placed), axis=1)
            late[placed] = False
        return Choice(cluster_of, placed, late)

    def late_after(self, t: int, ids: np.ndarray, late: np.ndarray | None) -> np.ndarray | None:
        """After the round in which Stage 1 formed the clusters, the clients absent from it
        are late (only where late clients are placed)."""
        if self.places_late_clients and t == self.config.warmup_rounds + 1:
            late = np.ones(self.config.num_clients, dtype=bool)
            late[ids] = False
        return late

    def regroup(self, round_: RoundUpdates) -> Regrouped:
        """Algorithm 1 lines 12-37 on the round's updates; in the warm-up, one model."""
        config, got, t = self.config, round_.got, round_.t
        starts, sizes = round_.starts, round_.sizes
        if t <= config.warmup_rounds:  # FedAvg: one model for all
            return self._aggregated(np.zeros(len(starts), dtype=np.int64), round_)
        compared = got.updates
        if config.update_reference == "common":
            compared = server.from_common_point(starts, got)
        rank, sim, points = server.similarity_space(
            compared,
            got.client_ids,
            self.low_rank_tensors if self.low_rank else None,
            config.explained_variance,
        )
        grown, adjusted, splits = None, None, ()
        if config.stage1 == "every_round" or t == config.warmup_rounds + 1:
            labels = server.incentive_labels(
                sim,
                sizes,
                starts,
                got,
                round_.evaluate,
                positive_incentive=self.positive_incentive,
                admission=config.admission,
                gain=config.gain,
                theta=config.theta,
            )
            grown = len(set(labels.tolist()))
        else:  # Stage 2 refines the clusters the clients trained in
            labels = round_.trained_in
        if self.adjustment and len(starts) > 1:
            _, adjusted = split_merge.dynamic_adjustment(
                points,
                labels,
                sizes,
                split_threshold=config.split_threshold,
                merge_threshold=config.merge_threshold,
                previous_splits=round_.previous_splits,
                normalize=config.em_space == "unit",
                singletons=config.singletons,
                split_guard=config.split_guard,
                merge_guard=config.merge_guard,
            )
            labels, splits = np.asarray(adjusted.labels, dtype=np.int64), tuple(adjusted.splits)
        return self._aggregated(
            labels,
            round_,
            rank=rank,
            splits=splits,
            incentive_clusters=grown,
            adjustment=adjusted,
        )

    def traffic(
        self, reporting: int, received_every_model: int, k: int, rank: int | None
    ) -> dict[str, float | str]:
        """With the low-rank step, also the uplink of its compressed updates."""
        columns = super().traffic(reporting, received_every_model, k, rank)
        if rank is not None:
            columns["uplink_lowrank_mb"] = round(
                4 * reporting * self.lowrank_uplink_floats(rank) / MB, 6
            )
        return columns

    def lowrank_uplink_floats(self, rank: int) -> int:
        """One client's uplink under the shared-basis reading of the low-rank step (reading
        #4 of the package)."""
        if self.config.low_rank_layers == "output":
            return similarity.uplink_floats(self.params, self.shapes[-2], rank)
        head = sum(math.prod(shape) for shape in self.shapes[-self.low_rank_tensors :])
        return similarity.shared_basis_floats(self.params, head, rank)


# Each method's configuration class and how its rule is built from it.
RULES: dict[type, Callable[[ClusteredImageConfig, ModelSpec], ClusterRule]] = {
    ClusteredImageConfig: ASCFLRule.of,
    CFLConfig: CFLRule.of,
    CFLFixedConfig: CFLFixedRule.of,
    IFCAConfig: IFCARule.of,
}


def rule_of(
    config: ClusteredImageConfig, spec: ModelSpec, chosen: int | None = None
) -> ClusterRule:
    """The rule of ``config``'s method (by its configuration class, :data:`RULES`) on
    ``spec``'s model. ``chosen``: with ``--clusters auto``, the K the one-shot pass chose
    (:mod:`.auto_clusters`); it replaces ``--clusters`` and the rule starts from the pass's
    clusters (``from_cut``; K = 1: IFCA's rule is FedAvg's, one model)."""
    if (config.clusters == AUTO) != (chosen is not None):
        raise ValueError(f"--clusters {config.clusters} with a chosen K of {chosen}")
    if chosen is not None:
        config = dataclasses.replace(config, clusters=chosen)
    for cls in type(config).__mro__:
        if cls in RULES:
            rule = RULES[cls](config, spec)
            if chosen is not None and isinstance(rule, CFLFixedRule | IFCARule):
                rule = dataclasses.replace(rule, from_cut=True)
            return rule
    raise TypeError(f"{type(config).__name__} is not a clustered-FL configuration")


def started_rule(
    config: ClusteredImageConfig, spec: ModelSpec, fed: RotatedFederatedData, run: RunDir
) -> tuple[ClusterRule, ChosenStart | None]:
    """The rule of a run of ``config`` in ``run`` (:func:`rule_of`) and, with ``--clusters
    auto``, the start it is built on: K and the first clusters, from the checkpoint of a
    resumed run, else from the one-shot pass over ``fed`` (:func:`.auto_clusters.settle`);
    ``None`` with ``--clusters K``."""
    start = auto_clusters.settle(config, spec, fed, run) if config.clusters == AUTO else None
    return rule_of(config, spec, None if start is None else start.k), start
