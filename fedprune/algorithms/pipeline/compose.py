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
from fedprune.algorithms.pipeline.policy import MaskPolicy, with_structure
from fedprune.algorithms.pipeline.recluster import ReclusterRule
from fedprune.algorithms.pipeline.scope import check_block, check_layerwise, kernel_layer_names
from fedprune.algorithms.pipeline.state import PipelineState, saved_clusters
from fedprune.checks import check_at_most
from fedprune.configs.har import AUTO
from fedprune.configs.pipeline import PipelineConfig
from fedprune.configs.protocol import dataset_label
from fedprune.data.partition import FederatedData
from fedprune.engine.client_work import LocalTraining
from fedprune.engine.compose import Inputs, write_clustering
from fedprune.engine.held_out import HeldOut
from fedprune.engine.loop import Algorithm, RoundsResult, Schema, Step
from fedprune.errors import ConfigError, DataError
from fedprune.models.spec import ModelSpec
from fedprune.models.user import UserModel
from fedprune.privacy.local import UploadNoise
from fedprune.runs import RunDir, artefacts, names
from fedprune.runs.files import RETRAIN
from fedprune.runs.finished import FinishedRun
from fedprune.sparsity import masks as M
from fedprune.sparsity import structured as S
from fedprune.sparsity.layers import (
    kernel_flags,
    merge,
    prunable_mask_flags,
    scope_flags,
    select,
)


class PipelineAlgorithm(Algorithm[PipelineState]):
    """The pipeline's rounds on the shared loop: rounds 1..T0 Phase 1, round T0 + 1 the
    clustering, then Phases 2-3 (with ``--recluster split-merge`` a pass before every
    ``--recluster-every``-th of their rounds), each followed by the held-out accuracy where
    due; the state and its checkpoint are :class:`PipelineState`'s."""

    total_option = "--phases"

    def __init__(
        self,
        config: PipelineConfig,
        rounds: PipelineRounds,
        init: list[np.ndarray],
        num_clients: int,
    ):
        """``init``: the model's initial trainable weights; ``num_clients``: the data's."""
        self.config, self.rounds, self.init, self.num_clients = config, rounds, init, num_clients
        t0, t1, t2 = config.phases
        self.total = t0 + 1 + t1 + t2
        self.n_params = int(sum(w.size for w in init))
        self.n_units = sum(M.unit_ids(w.shape, config.block)[1] for w in select(init, rounds.flags))
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
        model, policy = self.keras, inputs.get("policy")
        self.flags = prunable_mask_flags(model)  # every prunable kernel
        self.scope = scope_flags(model, config.prune_layers)  # those the policy prunes
        check_block(model, self.scope, config.block)
        self.graph = None
        if config.structure == "filters":  # whole filters and units (fedprune.sparsity.structured)
            self.graph = S.unit_graph(model, self.scope)
            structured = S.StructuredMasks(self.graph, config.budget)
            policy = with_structure(policy, config.method, structured)
        elif config.phases[2] > 0:
            sparsity = max(config.start_sparsity, config.target_sparsity)
            check_layerwise(model, self.scope, config.budget, config.block, sparsity)
        self.policy = policy
        where = f"{dataset_label(config.dataset)}'s clients"
        check_at_most("clients_per_round", config.clients_per_round, self.data.num_clients, where)

    def start(self, run: RunDir) -> tuple[PipelineAlgorithm, int]:
        config, data = self.config, self.data
        init = [np.asarray(w) for w in self.spec.initial_weights().trainable]
        rounds = PipelineRounds(
            spec=self.spec,
            clients={c.client_id: c for c in data.clients},
            flags=self.flags,
            scope=self.scope,
            n_prunable=int(sum(w.size for w in select(init, self.flags))),
            clusters=config.clusters,
            clients_per_round=config.clients_per_round,
            batch_size=config.batch_size,
            seed=config.seed,
            training=LocalTraining(
                config.local_epochs, config.learning_rate, config.prox, masked=True
            ),
            policy=self.policy,
            max_clusters=config.max_clusters,
            signal=config.cluster_signal,
            upload_noise=(
                UploadNoise(config.cluster_signal_noise, config.cluster_signal_clip)
                if config.cluster_signal_noise > 0
                else None
            ),
        )
        self.algorithm = PipelineAlgorithm(config, rounds, init, data.num_clients)
        return self.algorithm, self.algorithm.total

    def summary(self, run: RunDir, result: RoundsResult[PipelineState]) -> dict:
        config, model, algorithm = self.config, self.keras, self.algorithm
        state, flags, scope, rounds = result.state, self.flags, self.scope, algorithm.rounds
        ids = rounds.ids
        cluster_of = state.cluster_of(ids)
        choice = state.choice  # how --clusters auto chose K (a dataclass, else None)
        record = choice and choice.file_record(config.cluster_signal, config.max_clusters)
        write_clustering(run, cluster_of, state.cluster_w, record)
        if algorithm.recluster is not None:
            artefacts.write_reclusters(run.path, [e.record(ids) for e in state.reclusters])
        kernel_masks = {c: select(m, flags) for c, m in state.cluster_m.items()}
        artefacts.write_masks(run.path, kernel_masks)
        # Phase 4: every client fine-tunes its cluster's masked model under the mask (Eq. 12)
        start = cluster_starts(state.cluster_w, kernel_masks, cluster_of, flags)
        personal = self.personalize(run, *start, pruned=True)
        kernel_names = kernel_layer_names(model, flags)
        return {
            **self.har_summary(result, algorithm.n_params),  # wall_s: with the fine-tuning
            "phases": list(config.phases),
            "prunable_params": rounds.n_prunable,
            "clusters": {str(c): int(np.sum(state.assignment == c)) for c in range(state.clusters)},
            **({"clusters_chosen": state.clusters} if algorithm.auto else {}),
            **(recluster_summary(state) if algorithm.recluster is not None else {}),
            **_upload_privacy(rounds, state),
            "cluster_sparsity": {str(c): M.sparsity(m) for c, m in kernel_masks.items()},
            "prune_layers": kernel_layer_names(model, scope),
            "pruned_params": int(sum(w.size for w in select(algorithm.init, scope))),
            "sparsity_pruned_layers": float(
                np.mean([M.sparsity(select(state.cluster_m[cluster_of[i]], scope)) for i in ids])
            ),
            "layer_sparsity": {
                str(c): {n: M.sparsity([k]) for n, k in zip(kernel_names, m)}
                for c, m in kernel_masks.items()
            },
            **(
                {}
                if self.graph is None
                else S.summary(
                    self.graph, {c: select(m, scope) for c, m in state.cluster_m.items()}
                )
            ),
            **state.accounts.summary(),
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


def _upload_privacy(rounds: PipelineRounds, state: PipelineState) -> dict:
    """``summary.json``'s ``cluster_signal_privacy`` with ``--cluster-signal-noise``: the
    noise and each client's (ε, δ) over its uploads (the clustering step and every
    split/merge pass; :mod:`fedprune.privacy.local`)."""
    if rounds.upload_noise is None or rounds.clusters == 1:
        return {}
    passes = 1 + len(state.reclusters)
    return {"cluster_signal_privacy": rounds.upload_noise.record(passes)}


def recluster_summary(state: PipelineState) -> dict:
    """``summary.json``'s record of ``--recluster split-merge``: K after the clustering step
    (``clusters_initial``) and at the end (``clusters_final``), how many passes ran and how
    many changed the clusters (``reclusters.json`` has each)."""
    events = state.reclusters
    return {
        "clusters_initial": events[0].k_before if events else state.clusters,
        "clusters_final": state.clusters,
        "recluster_passes": len(events),
        "recluster_changes": sum(1 for e in events if (e.splits() or e.merges())),
    }


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
