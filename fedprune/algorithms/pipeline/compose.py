""":func:`run_pipeline`: the pipeline's phases as one family of the run composer.

Rounds 1..T0 are Phase 1, round T0 + 1 the clustering, then T1 Phase-2 and T2 Phase-3 rounds
(:mod:`~fedprune.algorithms.pipeline.phases`), all run and checkpointed by the shared loop
(:class:`PipelineAlgorithm`); then every client fine-tunes (Eq. 12) and the run directory
receives the clusters (and, where ``--clusters auto`` chose K, how: ``cluster_choice.json``;
with ``--recluster split-merge`` every split/merge pass: ``reclusters.json``), masks, cluster
and personal models and the summary (:class:`PipelineRun`). The run's life (settle, finished,
the directory, resume) is :mod:`fedprune.engine.compose`'s."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from fedprune.algorithms.caafp.communication import CommAccounts
from fedprune.algorithms.personal import PersonalRun
from fedprune.algorithms.pipeline.phases import (
    PipelineRounds,
    add_held_out,
    cluster_round,
    clustering_step,
    fedavg_round,
    recluster_step,
)
from fedprune.algorithms.pipeline.policies import policy_of
from fedprune.algorithms.pipeline.policy import MaskPolicy
from fedprune.algorithms.pipeline.recluster import ReclusterRule
from fedprune.algorithms.pipeline.scope import PrunedKernels
from fedprune.algorithms.pipeline.state import PipelineState, saved_clusters
from fedprune.checks import check_at_most
from fedprune.configs.har import AUTO
from fedprune.configs.pipeline import PipelineConfig
from fedprune.configs.protocol import dataset_label
from fedprune.data.partition import FederatedData
from fedprune.engine.compose import Inputs, write_clustering
from fedprune.engine.held_out import HeldOut
from fedprune.engine.loop import Algorithm, RoundsResult, Schema, Step
from fedprune.errors import ConfigError, DataError
from fedprune.models.spec import ModelSpec
from fedprune.models.user import UserModel
from fedprune.runs import RunDir, artefacts, names
from fedprune.runs.files import RETRAIN
from fedprune.runs.finished import FinishedRun
from fedprune.sparsity import masks as M
from fedprune.sparsity.layers import kernel_flags, merge, select


class PipelineAlgorithm(Algorithm[PipelineState]):
    """The pipeline's rounds on the shared loop: rounds 1..T0 Phase 1, round T0 + 1 the
    clustering, then Phases 2-3 (with ``--recluster split-merge`` a pass before every
    ``--recluster-every``-th of their rounds), each followed by the held-out accuracy where
    due; the state and its checkpoint are :class:`PipelineState`'s, the summary's record of
    the rounds :meth:`record`."""

    total_option = "--phases"

    def __init__(
        self, config: PipelineConfig, spec: ModelSpec, data: FederatedData, kernels: PrunedKernels
    ):
        """The rounds of ``config`` on ``data``'s clients from ``spec``'s initial weights,
        masking ``kernels`` (:meth:`PipelineRounds.of`)."""
        self.config, self.kernels, self.num_clients = config, kernels, data.num_clients
        init = self.init = [np.asarray(w) for w in spec.initial_weights().trainable]
        self.rounds = rounds = PipelineRounds.of(config, spec, data, kernels, init)
        t0, t1, t2 = config.phases
        self.total = t0 + 1 + t1 + t2
        self.n_params = int(sum(w.size for w in init))
        # the payload's mask bits: one per mask unit (a weight, or a --block), or with
        # --structure filters one per filter or unit (the kernels' masks follow from them)
        self.n_units = (
            kernels.graph.n_units
            if kernels.graph is not None
            else sum(M.unit_ids(w.shape, config.block)[1] for w in select(init, rounds.flags))
        )
        self.held_out = HeldOut(config.eval_every, self.total, rounds.spec.keras, rounds.clients)
        self.recluster = ReclusterRule.from_config(config)
        self.auto = config.clusters == AUTO
        self.varying = self.auto or self.recluster is not None  # K read from the checkpoint

    def accounts(self, saved: dict | None = None) -> CommAccounts:
        return CommAccounts(self.n_params, self.rounds.n_prunable, self.n_units, saved)

    def describe(self, t: int) -> str:
        t0, t1, _ = self.config.phases
        phase = "phase 1" if t <= t0 else "clustering" if t == t0 + 1 else "phase 2"
        phase = "phase 3" if t > t0 + 1 + t1 else phase
        return f"{self.config.method} {dataset_label(self.config.dataset)} {phase}"

    def initial(self) -> PipelineState:
        return PipelineState(self.init, self.accounts())

    def step(self, t: int, state: PipelineState) -> Step[PipelineState]:
        t0, t1, _ = self.config.phases
        rounds, recluster = self.rounds, self.recluster
        if t <= t0:
            rows = fedavg_round(rounds, state, t)
        elif t == t0 + 1:
            rows = clustering_step(rounds, state, t)
        else:
            if recluster is not None and recluster.due(t - (t0 + 1)):
                recluster_step(rounds, state, t, recluster)
            rows = cluster_round(rounds, state, t, phase3_t=t - (t0 + 1 + t1))
        if self.held_out.due(t):
            add_held_out(rows, state, rounds.ids, self.held_out)
        return Step(state, rows)

    def clusters_of(self, arrays: Mapping[str, Sequence[np.ndarray]]) -> int:
        """K of a checkpoint: its own where the run chose or changes K, else ``--clusters``."""
        return saved_clusters(arrays) if self.varying else self.config.clusters

    def schema(self, arrays: Mapping[str, Sequence[np.ndarray]]) -> Schema:
        return PipelineState.schema(
            arrays,
            [w.shape for w in self.init],
            len(self.rounds.ids),
            self.clusters_of(arrays),
            self.config.max_clusters,
            self.num_clients if self.auto else None,
        )

    def restore(self, rounds_done: int, arrays: dict, scalars: dict) -> PipelineState:
        state = PipelineState.from_checkpoint(
            arrays, scalars, None if self.varying else self.config.clusters, self.accounts
        )
        if self.auto:
            state.check_chosen(self.config.max_clusters)
        return state

    def record(self, state: PipelineState, cluster_of: Mapping[int, int]) -> dict:
        """The summary's entries of the rounds that ended in ``state`` (``cluster_of``: each
        client's cluster): the phases, the prunable weights, the clusters
        (:meth:`PipelineState.cluster_record`), the clustering uploads' privacy
        (:meth:`PipelineRounds.upload_privacy`), the masks' statistics
        (:meth:`PrunedKernels.summary`) and the communication."""
        return {
            "phases": list(self.config.phases),
            "prunable_params": self.rounds.n_prunable,
            **state.cluster_record(self.auto, self.recluster is not None),
            **self.rounds.upload_privacy(state),
            **self.kernels.summary(state.cluster_m, cluster_of, self.init),
            **state.accounts.summary(),
        }


class PipelineRun(PersonalRun[PipelineConfig], family=PipelineConfig):
    """A pipeline run for the composer (:mod:`fedprune.engine.compose`): every check of the
    data, the clusters, the model and the masks before anything is written (the HAR run's,
    :class:`~fedprune.engine.har_run.HarRun`, then the pipeline's own); the rounds; then
    Phase 4 (:meth:`~fedprune.algorithms.personal.PersonalRun.personalize`), the artefacts
    and the summary (the module text)."""

    takes = ("policy", "model")
    # clients_per_round is checked after the model's and the masks' checks (end of prepare),
    # so a configuration failing both names the masks first, as it always has
    at_most_clients = ("clusters",)

    def check_counts(self, num_clients: int, where: str) -> None:
        """``--clusters auto``'s K first (:func:`check_choosable`), then the counts."""
        if self.config.clusters == AUTO:
            check_choosable(self.config.max_clusters, num_clients, f"{where}'s clients")
        super().check_counts(num_clients, where)

    def __init__(self, config: PipelineConfig, inputs: Inputs):
        super().__init__(config, inputs)
        self.kernels = PrunedKernels.checked(self.keras, config, inputs.get("policy"))
        where = f"{dataset_label(config.dataset)}'s clients"
        check_at_most("clients_per_round", config.clients_per_round, self.data.num_clients, where)

    def start(self, run: RunDir) -> tuple[PipelineAlgorithm, int]:
        self.algorithm = PipelineAlgorithm(self.config, self.spec, self.data, self.kernels)
        return self.algorithm, self.algorithm.total

    def summary(self, run: RunDir, result: RoundsResult[PipelineState]) -> dict:
        config, algorithm, state = self.config, self.algorithm, result.state
        ids = algorithm.rounds.ids
        cluster_of = state.cluster_of(ids)
        choice = state.choice  # how --clusters auto chose K (a dataclass, else None)
        record = choice and choice.file_record(config.cluster_signal, config.max_clusters)
        write_clustering(run, cluster_of, state.cluster_w, record)
        if algorithm.recluster is not None:
            artefacts.write_reclusters(run.path, [e.record(ids) for e in state.reclusters])
        kernel_masks = self.kernels.kernel_masks(state.cluster_m)
        artefacts.write_masks(run.path, kernel_masks)
        # Phase 4: every client fine-tunes its cluster's masked model under the mask (Eq. 12)
        start = cluster_starts(state.cluster_w, kernel_masks, cluster_of, self.kernels.flags)
        personal = self.personalize(run, *start, pruned=True)
        return {
            **self.har_summary(result, algorithm.n_params),  # wall_s: with the fine-tuning
            **algorithm.record(state, cluster_of),
            **personal,
        }


def run_pipeline(
    config: PipelineConfig,
    policy: MaskPolicy | None,
    out: str | Path,
    data_dir: str | Path | None = None,
    progress: bool = True,
    model: UserModel | None = None,
) -> dict:
    """Train (or resume, or return the finished) run in ``out``; returns the summary.

    ``policy`` may be ``None`` only when T2 = 0 (dense methods). ``model`` is your own model
    (:mod:`fedprune.models.user`; ``config.model`` must name it); without it the run trains
    the model ``config.model`` names.
    """
    if policy is None and config.phases[2] > 0:
        raise ConfigError(f"{config.method}: T2 > 0 needs a mask policy")
    return PipelineRun.run(config, out, data_dir, progress, policy=policy, model=model)


def check_choosable(max_clusters: int, num_clients: int, clients: str) -> None:
    """``--clusters auto`` on ``num_clients`` clients: the silhouette scores K = 2..N - 1
    only, so at least 3 clients and ``--max-clusters`` at most N - 1; one ConfigError line
    before anything is made."""
    if num_clients < 3:
        raise ConfigError(
            f"--clusters auto needs at least 3 clients to choose K (the silhouette scores "
            f"K = 2..N - 1), {clients} are {num_clients}; give --clusters 1"
            + (" or 2" if num_clients == 2 else "")
        )
    check_at_most(
        "max_clusters",
        max_clusters,
        num_clients - 1,
        f"{clients} - 1: the silhouette scores K up to N - 1",
    )


def run_method(
    config: PipelineConfig,
    out: str | Path,
    data_dir: str | Path | None = None,
    progress: bool = True,
    model: UserModel | None = None,
) -> dict:
    """The runner of every pipeline method (CA-AFP, Global-FT, FedCHAR, EfficientFL,
    FedSNIP): :func:`run_pipeline` with the mask policy registered for the configuration's
    class (:mod:`.policies`)."""
    return run_pipeline(config, policy_of(config), out, data_dir, progress, model)


def cluster_starts(
    cluster_w: Mapping[int, Sequence[np.ndarray]],
    kernel_masks: Mapping[int, Sequence[np.ndarray]],
    cluster_of: Mapping[int, int],
    flags: Sequence[bool],
) -> tuple[dict[int, list[np.ndarray]], dict[int, list[np.ndarray]]]:
    """Phase 4's inputs (Eq. 12): client i starts from its cluster's model under the cluster's
    mask, w_c ⊙ M_c, and keeps M_c's kernel masks (float32; tensors outside ``flags``, the
    biases, are never pruned). Returns ({client: start weights}, {client: kernel masks}).

    The clients of one cluster share one start and one mask list (made once per cluster, read
    and never written by fine-tuning), so memory grows with the clusters, not the clients."""
    per_cluster = {}
    for c in sorted(set(cluster_of.values())):
        kernels = [np.asarray(m, np.float32) for m in kernel_masks[c]]
        per_cluster[c] = (M.apply(cluster_w[c], merge(kernels, cluster_w[c], flags)), kernels)
    start = {i: per_cluster[c][0] for i, c in cluster_of.items()}
    masks = {i: per_cluster[c][1] for i, c in cluster_of.items()}
    return start, masks


def finetune_start(
    run: FinishedRun, data: FederatedData, spec: ModelSpec
) -> tuple[dict[int, list[np.ndarray]], dict[int, list[np.ndarray]]]:
    """Phase 4's inputs of the finished pipeline run ``run`` (``fedprune finetune``): its
    ``cluster_models.npz``, ``masks.npz`` and ``clusters.json`` through :func:`cluster_starts`,
    as :func:`run_pipeline` computed them before fine-tuning."""
    found = run.kernel_masks()
    if found is None:
        raise DataError(f"{run.path}: the run has no masks.npz; {RETRAIN}")
    kernel_masks, cluster_of = found
    missing = sorted({c.client_id for c in data.clients} - set(cluster_of))
    if missing:
        raise DataError(f"{run.path / names.CLUSTERS}: no cluster for client(s) {missing}")
    models = artefacts.read_cluster_models(run.path)
    return cluster_starts(models, kernel_masks, cluster_of, kernel_flags(spec))
