""":func:`run_pipeline`: the pipeline's phases composed on the shared round loop.

Rounds 1..T0 are Phase 1, round T0 + 1 the clustering, then T1 Phase-2 and T2 Phase-3 rounds
(:mod:`~fedprune.algorithms.pipeline.phases`), all run and checkpointed by
:func:`fedprune.engine.loop.run_rounds`; then every client fine-tunes (Eq. 12) and the run
directory receives the clusters, masks, cluster and personal models and the summary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from fedprune.algorithms.caafp.communication import CommAccounts
from fedprune.algorithms.personal import finetune_personal
from fedprune.algorithms.pipeline.phases import (
    PipelineRounds,
    add_held_out,
    cluster_round,
    clustering_step,
    fedavg_round,
)
from fedprune.algorithms.pipeline.policy import MaskPolicy
from fedprune.algorithms.pipeline.scope import check_block, check_layerwise, kernel_layer_names
from fedprune.algorithms.pipeline.state import PipelineState
from fedprune.checks import check_at_most
from fedprune.configs.pipeline import PipelineConfig
from fedprune.configs.protocol import dataset_label, settle
from fedprune.data.partition import FederatedData
from fedprune.data.registry import har_recipe, load_recorded
from fedprune.engine.client_work import LocalTraining
from fedprune.engine.held_out import HeldOut
from fedprune.engine.loop import Step, run_rounds
from fedprune.errors import ConfigError, DataError
from fedprune.models.spec import ModelSpec
from fedprune.models.user import UserModel, resolve, write_architecture
from fedprune.runs import RunDir, artefacts, names
from fedprune.runs.files import RETRAIN
from fedprune.runs.finished import FinishedRun
from fedprune.sparsity import masks as M
from fedprune.sparsity.layers import (
    dense_layers,
    kernel_flags,
    merge,
    prunable_mask_flags,
    scope_flags,
    select,
)

# Options added after runs were first made; such a run recorded none and resumes as it was.


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
    config, record = settle(config, out, config.ADDED_LATER)
    run = RunDir.existing(out, record)
    if run is not None and run.finished:
        return run.read_summary()
    t0, t1, t2 = config.phases
    data = load_recorded(har_recipe(config), data_dir)
    clients = f"{dataset_label(config.dataset)}'s clients"
    check_at_most("clusters", config.clusters, data.num_clients, clients)
    trained = resolve(config.model, model, out)
    spec = ModelSpec(data.input_shape, data.num_classes, config.seed, trained)
    model = spec.keras()
    flags = prunable_mask_flags(model)  # every prunable kernel
    scope = scope_flags(model, config.prune_layers)  # those the policy prunes
    check_block(model, scope, config.block)
    if t2 > 0:
        sparsity = max(config.start_sparsity, config.target_sparsity)
        check_layerwise(model, scope, config.budget, config.block, sparsity)
    check_at_most("clients_per_round", config.clients_per_round, data.num_clients, clients)
    if run is None:  # only now: a refused configuration leaves no directory behind
        run = RunDir(out, record)
    if isinstance(trained, UserModel):
        write_architecture(model, run.path)

    init = [np.asarray(w) for w in spec.initial_weights().trainable]
    n_params = int(sum(w.size for w in init))
    n_prunable = int(sum(w.size for w in select(init, flags)))
    n_units = sum(M.unit_ids(w.shape, config.block)[1] for w in select(init, flags))
    rounds = PipelineRounds(
        spec=spec,
        clients={c.client_id: c for c in data.clients},
        flags=flags,
        scope=scope,
        n_prunable=n_prunable,
        clusters=config.clusters,
        clients_per_round=config.clients_per_round,
        batch_size=config.batch_size,
        seed=config.seed,
        training=LocalTraining(config.local_epochs, config.learning_rate, config.prox, masked=True),
        policy=policy,
    )

    held_out = HeldOut(config.eval_every, t0 + 1 + t1 + t2, spec.keras, rounds.clients)

    def step(t: int, state: PipelineState) -> Step[PipelineState]:
        if t <= t0:
            rows = fedavg_round(rounds, state, t)
        elif t == t0 + 1:
            rows = clustering_step(rounds, state, t)
        else:
            rows = cluster_round(rounds, state, t, phase3_t=t - (t0 + 1 + t1))
        if held_out.due(t):
            add_held_out(rows, state, rounds.ids, held_out)
        return Step(state, rows)

    def shapes(arrays: Mapping[str, Sequence[np.ndarray]]) -> dict[str, list[tuple]]:
        """The shapes of a checkpoint's arrays: the model's, and one cluster per client."""
        model_shapes = [w.shape for w in init]
        expected = {"global": model_shapes, "assignment": [(len(rounds.ids),)]}
        if "assignment" in arrays:
            for c in range(config.clusters):
                expected[f"cluster{c}_w"] = expected[f"cluster{c}_m"] = model_shapes
        return expected

    def phase_of(t: int) -> str:
        phase = "phase 1" if t <= t0 else "clustering" if t == t0 + 1 else "phase 2"
        return "phase 3" if t > t0 + 1 + t1 else phase

    result = run_rounds(
        run,
        lambda: PipelineState(init, CommAccounts(n_params, n_prunable, n_units)),
        lambda _rounds, arrays, scalars: PipelineState.from_checkpoint(
            arrays,
            scalars,
            config.clusters,
            lambda s: CommAccounts(n_params, n_prunable, n_units, s),
        ),
        step,
        t0 + 1 + t1 + t2,
        desc=lambda t: f"{config.method} {dataset_label(config.dataset)} {phase_of(t)}",
        progress=progress,
        shapes=shapes,
        total_option="--phases",
    )
    state = result.state
    ids = rounds.ids
    cluster_of = state.cluster_of(ids)
    artefacts.write_clusters(run.path, cluster_of)
    artefacts.write_cluster_models(run.path, state.cluster_w)
    kernel_masks = {c: select(m, flags) for c, m in state.cluster_m.items()}
    artefacts.write_masks(run.path, kernel_masks)

    # Phase 4: every client fine-tunes its cluster's masked model under the mask (Eq. 12)
    start, client_masks = cluster_starts(state.cluster_w, kernel_masks, cluster_of, flags)
    tuned, deploy = finetune_personal(
        run, data, start, client_masks, config, progress, pruned=True, model=trained
    )

    kernel_names = kernel_layer_names(model, flags)
    accounts = state.accounts
    summary = {
        "method": config.method,
        "dataset": config.dataset,
        "seed": config.seed,
        "phases": list(config.phases),
        "num_clients": data.num_clients,
        "params": n_params,
        "prunable_params": n_prunable,
        "clusters": {str(c): int(np.sum(state.assignment == c)) for c in range(config.clusters)},
        "cluster_sparsity": {str(c): M.sparsity(m) for c, m in kernel_masks.items()},
        "sparsity": tuned.sparsity,
        "prune_layers": kernel_layer_names(model, scope),
        "dense_layers": dense_layers(model),
        "pruned_params": int(sum(w.size for w in select(init, scope))),
        "sparsity_pruned_layers": float(
            np.mean([M.sparsity(select(state.cluster_m[cluster_of[i]], scope)) for i in ids])
        ),
        "layer_sparsity": {
            str(c): {n: M.sparsity([k]) for n, k in zip(kernel_names, m)}
            for c, m in kernel_masks.items()
        },
        **accounts.summary(),
        "wall_s": result.clock.seconds(),
        "finetune": tuned.summary,
        "deploy": deploy,
    }
    run.write_summary(summary)
    return summary


def run_method(
    config: PipelineConfig,
    out: str | Path,
    data_dir: str | Path | None = None,
    progress: bool = True,
    model: UserModel | None = None,
) -> dict:
    """The runner of every pipeline method (CA-AFP, Global-FT, FedCHAR, EfficientFL,
    FedSNIP): :func:`run_pipeline` with the mask policy the configuration's class names
    (:meth:`fedprune.configs.pipeline.PipelineConfig.policy`)."""
    return run_pipeline(config, config.policy(), out, data_dir, progress, model)


def cluster_starts(
    cluster_w: Mapping[int, Sequence[np.ndarray]],
    kernel_masks: Mapping[int, Sequence[np.ndarray]],
    cluster_of: Mapping[int, int],
    flags: Sequence[bool],
) -> tuple[dict[int, list[np.ndarray]], dict[int, list[np.ndarray]]]:
    """Phase 4's inputs (Eq. 12): client i starts from its cluster's model under the cluster's
    mask, w_c ⊙ M_c, and keeps M_c's kernel masks (float32; tensors outside ``flags``, the
    biases, are never pruned). Returns ({client: start weights}, {client: kernel masks})."""
    start, masks = {}, {}
    for i, c in cluster_of.items():
        kernels = [np.asarray(m, np.float32) for m in kernel_masks[c]]
        start[i] = M.apply(cluster_w[c], merge(kernels, cluster_w[c], flags))
        masks[i] = kernels
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
