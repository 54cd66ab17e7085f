"""The pipeline's rounds as functions of its state (CA-AFP Algorithm 1, general form).

Each function runs one step of the shared round loop (:mod:`fedprune.engine.loop`) on a
:class:`~fedprune.algorithms.pipeline.state.PipelineState` and returns the step's
``metrics.csv`` rows:

* :func:`fedavg_round`: a Phase-1 round, data-size-weighted FedAvg over sampled clients (Eq. 2);
* :func:`clustering_step`: one local epoch per client from w^(T0), cosine distances of the
  updates (Eq. 3-4), agglomerative clustering (or the same on the clients' label histograms,
  ``--cluster-signal labels``); with ``--clusters auto`` K is chosen from the same distances
  (:mod:`fedprune.algorithms.caafp.choose_k`); every cluster starts from w^(T0), dense;
* :func:`cluster_round`: a Phase-2 or Phase-3 round: every cluster trains its model under its
  mask with the proximal objective towards w^(T0) (Eq. 5), aggregated within the cluster
  (Eq. 6); after a scoring round the mask policy sets the new mask and the model is masked
  (Eq. 7). All clusters of a round are one TFF computation (:mod:`fedprune.engine.clustered`).

Interpretations are listed in :mod:`fedprune.algorithms.pipeline`.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import tensorflow_federated as tff

from fedprune.algorithms.caafp.choose_k import choose_clusters
from fedprune.algorithms.caafp.clustering import cluster_clients
from fedprune.algorithms.caafp.label_histograms import label_histograms
from fedprune.algorithms.pipeline.policy import MaskPolicy, update_masks
from fedprune.algorithms.pipeline.recluster import (
    ReclusterEvent,
    ReclusterRule,
    common_model,
    event_of,
    regroup_models,
)
from fedprune.algorithms.pipeline.scope import PrunedKernels
from fedprune.algorithms.pipeline.state import PipelineState
from fedprune.configs.har import AUTO
from fedprune.configs.pipeline import PipelineConfig
from fedprune.data.partition import ClientData, FederatedData
from fedprune.engine.client_work import LocalTraining
from fedprune.engine.clustered import build_clustered_round, run_clustered_round
from fedprune.engine.held_out import COLUMN, HeldOut
from fedprune.engine.process import build_fedavg_process
from fedprune.engine.rounds import run_round, sample_by_cluster, sample_clients
from fedprune.engine.updates import one_epoch_updates
from fedprune.models.spec import ModelSpec
from fedprune.privacy.local import UploadNoise
from fedprune.sparsity import masks as M
from fedprune.sparsity.layers import select


@dataclasses.dataclass
class PipelineRounds:
    """What every round needs, built once per run: the clients, the model, which weights are
    prunable kernels (``flags``) and which of those the policy prunes (``scope``), the
    clustering asked for (``clusters``: K or ``"auto"``, ``max_clusters``, ``signal``), the
    local-training settings, and the TFF processes (built on first use)."""

    spec: ModelSpec
    clients: dict[int, ClientData]
    flags: list[bool]
    scope: list[bool]
    n_prunable: int
    clusters: int | str
    clients_per_round: int
    batch_size: int
    seed: int
    training: LocalTraining
    policy: MaskPolicy | None
    max_clusters: int = 8
    signal: str = "update"
    upload_noise: UploadNoise | None = None
    _built: dict = dataclasses.field(default_factory=dict, repr=False)

    @classmethod
    def of(
        cls,
        config: PipelineConfig,
        spec: ModelSpec,
        data: FederatedData,
        kernels: PrunedKernels,
        init: list[np.ndarray],
    ) -> PipelineRounds:
        """The rounds of ``config`` on ``data``'s clients with ``spec``'s model (``init``: its
        initial trainable weights), masking ``kernels`` with their policy: local training
        under the masks, and with ``--cluster-signal-noise`` the clustering uploads' noise
        (:class:`~fedprune.privacy.local.UploadNoise`)."""
        noise = config.cluster_signal_noise
        return cls(
            spec=spec,
            clients={c.client_id: c for c in data.clients},
            flags=kernels.flags,
            scope=kernels.scope,
            n_prunable=int(sum(w.size for w in select(init, kernels.flags))),
            clusters=config.clusters,
            clients_per_round=config.clients_per_round,
            batch_size=config.batch_size,
            seed=config.seed,
            training=LocalTraining(
                config.local_epochs, config.learning_rate, config.prox, masked=True
            ),
            policy=kernels.policy,
            max_clusters=config.max_clusters,
            signal=config.cluster_signal,
            upload_noise=UploadNoise(noise, config.cluster_signal_clip) if noise > 0 else None,
        )

    @property
    def ids(self) -> list[int]:
        return sorted(self.clients)

    def upload_privacy(self, state: PipelineState) -> dict:
        """``summary.json``'s ``cluster_signal_privacy`` with ``--cluster-signal-noise``: the
        noise and each client's (ε, δ) over its uploads (the clustering step and every
        split/merge pass of ``state``; :mod:`fedprune.privacy.local`)."""
        if self.upload_noise is None or self.clusters == 1:
            return {}
        passes = 1 + len(state.reclusters)
        return {"cluster_signal_privacy": self.upload_noise.record(passes)}

    @functools.cached_property
    def fedavg_process(self) -> tff.learning.templates.LearningProcess:
        return build_fedavg_process(self.spec, self.training.epochs, self.training.learning_rate)

    @functools.cached_property
    def fedavg_base(self) -> tff.learning.templates.LearningAlgorithmState:
        return self.fedavg_process.initialize()

    def clustered_round(self, k: int, measure: bool) -> tff.Computation:
        """Every one of the ``k`` clusters' Phase-2/3 round in one TFF computation (built on
        first use; K is known once the clients are clustered); ``measure``: also gathering
        the score statistics (a scoring round)."""
        if (k, measure) not in self._built:
            training = self.training
            if measure:
                training = dataclasses.replace(training, statistics=True)
            self._built[k, measure] = build_clustered_round(self.spec, training, k)
        return self._built[k, measure]

    def row(
        self,
        state: PipelineState,
        t: int,
        phase: str,
        cluster: int,
        clients: int,
        train: dict | None,
    ) -> dict:
        """The ``metrics.csv`` row of cluster ``cluster`` (-1: all clients) in round ``t``."""
        masks = state.cluster_m.get(cluster)
        return {
            "round": t,
            "phase": phase,
            "cluster": cluster,
            "clients": clients,
            "train_loss": float(train["train_loss"]) if train else "",
            "train_accuracy": float(train["train_accuracy"]) if train else "",
            "sparsity": M.sparsity(select(masks, self.flags)) if masks else 0.0,
            "comm_mb_eq13": state.accounts.total_mb("eq13"),
            "comm_mb_payload": state.accounts.total_mb("payload"),
        }


def fedavg_round(rounds: PipelineRounds, state: PipelineState, t: int) -> list[dict]:
    """Phase 1, round ``t``: FedAvg over ``clients_per_round`` sampled clients (Eq. 2)."""
    process = rounds.fedavg_process
    start = process.set_model_weights(
        rounds.fedavg_base, tff.learning.models.ModelWeights(state.global_w, [])
    )
    chosen = sample_clients(rounds.ids, rounds.clients_per_round, rounds.seed, t)
    output = run_round(
        process, start, [rounds.clients[i] for i in chosen], t, rounds.seed, rounds.batch_size
    )
    state.global_w = [np.asarray(w) for w in process.get_model_weights(output.state).trainable]
    state.accounts.model(rounds.n_prunable, 2 * len(chosen))
    return [rounds.row(state, t, "fedavg", -1, len(chosen), output.metrics["client_work"]["train"])]


def clustering_signals(
    rounds: PipelineRounds,
    state: PipelineState,
    t: int,
    start: list[np.ndarray] | None = None,
) -> np.ndarray:
    """What every client sends for the clustering, one row per client in id order, counted in
    the ``clustering`` communication: its one-epoch update from w^(T0) (Eq. 3; the download
    of w^(T0) and the upload of the update), or from ``start`` where given (a split/merge
    pass's common model), or with ``signal="labels"`` its label histogram (C values
    uploaded, :mod:`fedprune.algorithms.caafp.label_histograms`); with ``upload_noise``
    each client clips and noises its row before it leaves (:mod:`fedprune.privacy.local`)."""
    signals = _clean_signals(rounds, state, t, start)
    return signals if rounds.upload_noise is None else rounds.upload_noise.apply(signals)


def _clean_signals(
    rounds: PipelineRounds, state: PipelineState, t: int, start: list[np.ndarray] | None
) -> np.ndarray:
    ids = rounds.ids
    if rounds.signal == "labels":
        histograms = label_histograms(
            [rounds.clients[i].y_train for i in ids], rounds.spec.num_classes
        )
        state.accounts.values(histograms.size, "clustering")
        return histograms
    updates = one_epoch_updates(
        rounds.spec,
        state.global_w if start is None else start,
        [rounds.clients[i] for i in ids],
        rounds.training.learning_rate,
        rounds.seed,
        rounds.batch_size,
        round_num=t,
    )
    state.accounts.model(rounds.n_prunable, 2 * len(ids), "clustering")
    return updates


def clustering_step(rounds: PipelineRounds, state: PipelineState, t: int) -> list[dict]:
    """After Phase 1: cluster the clients by their one-epoch updates from w^(T0) (Eq. 3-4),
    or their label histograms; with ``clusters="auto"`` K is chosen from the same signals
    (:func:`~fedprune.algorithms.caafp.choose_k.choose_clusters`, kept in ``state.choice``);
    with K = 1 asked for, nothing is computed or sent. Every cluster starts from w^(T0) with
    mask 1."""
    ids = rounds.ids
    if rounds.clusters == 1:
        k = 1
        state.assignment = np.zeros(len(ids), dtype=np.int64)
    else:
        signals = clustering_signals(rounds, state, t)
        if rounds.clusters == AUTO:
            state.choice = choose_clusters(signals, rounds.max_clusters)
            k = state.choice.chosen
        else:
            k = int(rounds.clusters)
        state.assignment = cluster_clients(signals, k)
    for c in range(k):
        state.cluster_w[c] = [w.copy() for w in state.global_w]
        state.cluster_m[c] = [np.ones_like(w, np.float32) for w in state.global_w]
    return [rounds.row(state, t, "clustering", -1, len(ids), None)]


def recluster_step(
    rounds: PipelineRounds, state: PipelineState, t: int, rule: ReclusterRule
) -> ReclusterEvent:
    """``--recluster split-merge``, before round ``t``: every client's signal from the common
    model (or its label histogram), AS-CFL's split/merge pass on it
    (:meth:`~fedprune.algorithms.pipeline.recluster.ReclusterRule.adjust`, the previous
    pass's splits guarded against), the new clusters' models and masks
    (:func:`~fedprune.algorithms.pipeline.recluster.regroup_models`); the pass is appended to
    ``state.reclusters`` and returned. See :mod:`fedprune.algorithms.pipeline.recluster`."""
    ids = rounds.ids
    sizes = np.array([rounds.clients[i].num_train for i in ids], dtype=np.float64)
    before = np.asarray(state.assignment, dtype=np.int64)
    start = None
    if rounds.signal != "labels":
        start = common_model(state.cluster_w, before, sizes)
    signals = clustering_signals(rounds, state, t, start)
    previous = state.reclusters[-1].split_pairs() if state.reclusters else ()
    adjustment, after, capped = rule.adjust(signals, before, sizes, previous)
    state.cluster_w, state.cluster_m = regroup_models(
        state.cluster_w,
        state.cluster_m,
        before,
        after,
        sizes,
        rounds.scope,
        rule.block,
        rule.budget,
    )
    state.assignment = after
    event = event_of(t, before, after, adjustment, capped)
    state.reclusters.append(event)
    return event


def cluster_round(
    rounds: PipelineRounds, state: PipelineState, t: int, phase3_t: int
) -> list[dict]:
    """Round ``t`` of Phases 2-3 (``phase3_t`` >= 1: the Phase-3 round number, else Phase 2):
    each cluster's sampled clients train w_c ⊙ M_c with the proximal term towards w^(T0)
    (Eq. 5), aggregated in the cluster (Eq. 6); after a scoring round the policy's new mask
    is applied to the aggregate (Eq. 7). All clusters run in one TFF computation."""
    policy = rounds.policy
    measure = phase3_t >= 1 and policy is not None and policy.scoring_round(phase3_t)
    chosen = sample_by_cluster(
        state.cluster_of(rounds.ids), rounds.clients_per_round, rounds.seed, t
    )
    outputs = run_clustered_round(
        rounds.clustered_round(state.clusters, measure),
        state.cluster_w,
        state.cluster_m,
        state.global_w if rounds.training.prox > 0 else None,
        {c: [rounds.clients[i] for i in members] for c, members in chosen.items()},
        t,
        rounds.seed,
        rounds.batch_size,
    )
    rows = []
    phase = "prune" if phase3_t >= 1 else "cluster"
    for c, members in chosen.items():
        output = outputs[c]
        n_active = int(sum(m.sum() for m in select(state.cluster_m[c], rounds.flags)))
        state.accounts.model(n_active, 2 * len(members))
        new_w = output.weights
        if measure:
            state.accounts.statistics(n_active, len(members))
            state.cluster_m[c] = update_masks(
                policy,
                phase3_t,
                state.cluster_w[c],
                new_w,
                state.cluster_m[c],
                output.statistics,
                rounds.scope,
            )
            new_w = M.apply(new_w, state.cluster_m[c])
        state.cluster_w[c] = new_w
        rows.append(rounds.row(state, t, phase, c, len(members), output.train))
    return rows


def add_held_out(rows: list[dict], state: PipelineState, ids: list[int], held_out: HeldOut) -> None:
    """Each row's held-out accuracy (``--eval-every``): the row of all clients (cluster -1)
    evaluates the global model on every client, a cluster's row that cluster's (masked)
    model on all its members, not only the round's sampled ones."""
    cluster_of = state.cluster_of(ids) if state.assignment is not None else {}
    for row in rows:
        c = row["cluster"]
        if c == -1:
            row[COLUMN] = held_out.accuracy(state.global_w, ids)
        else:
            members = [i for i in ids if cluster_of[i] == c]
            row[COLUMN] = held_out.accuracy(state.cluster_w[c], members)
