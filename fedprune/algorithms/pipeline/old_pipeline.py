"""The clustered, masked federated pipeline shared by CA-AFP and its baselines.

Phases (CA-AFP's Algorithm 1 in general form; each algorithm module picks the lengths, the
number of clusters and a :class:`MaskPolicy`):

1. T0 rounds of data-size-weighted FedAvg (Eq. 2) over sampled clients.
2. Clustering when K > 1: every client trains one local epoch from w^(T0) and sends its
   update; cosine distances (Eq. 3-4), agglomerative clustering, average linkage.
3. T1 rounds of dense cluster training with the proximal objective (Eq. 5) towards the fixed
   reference w^(T0), data-size-weighted aggregation in the cluster (Eq. 6).
4. T2 rounds of masked cluster training (Eq. 7); after a scoring round the policy updates the
   cluster's mask from that round's federated statistics.
5. Fine-tuning: every client trains its cluster model under the fixed mask (Eq. 12).

Shared interpretations (all configurable):

* Sampling: Phase 1 samples ``clients_per_round`` clients from all. Phases 2-3 sample the same
  total, split across clusters in proportion to their sizes with at least one client per
  cluster (so every cluster trains, and every scheduled mask update happens, in every round;
  27/2/1 clients -> 8/1/1). This keeps the paper's 10 clients per round and its communication.
* The clusters of a round run as concurrent TFF calls, one per cluster.
* Statistics of a scoring round: gradients at the broadcast w_c ⊙ M_c before local training,
  the clients' trained models, and the aggregated cluster model; unweighted means over the
  cluster's participating clients (the model aggregation is data-size weighted).
* Prunable: conv and dense kernels; biases stay dense (:mod:`fedprune.sparsity.layers`).
  ``prune_layers`` (``--prune-layers``, our extension) names the layers whose kernels are
  pruned (default: all). The mask policy then sees only those kernels: the target sparsity,
  the schedule's counts, the ranking and Eq. 9's maximum are over them, and the other kernels
  stay dense. The summary's ``sparsity`` is, as before, over all conv and dense kernels
  (``prunable_params`` weights); ``sparsity_pruned_layers`` is over the chosen kernels
  (``pruned_params`` weights), ``layer_sparsity`` per cluster and kernel.
* A layerwise budget is refused for a chosen kernel that would have to lose whole output units
  (:func:`fedprune.sparsity.masks.starves_units`, e.g. the classifier with ``block=16``).
* Communication counts every transfer (Eq. 13 and encoded payload), by kind: models,
  clustering (download of w^(T0) and upload of the update, every client), statistics.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Protocol

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff
from tqdm import tqdm

from fedprune.checks import (
    check_at_most,
    check_count,
    check_nonnegative,
    check_positive,
    check_range,
    check_seed,
)
from fedprune.clustering import cluster_clients
from fedprune.communication import CommAccounts
from fedprune.data.registry import load_federated
from fedprune.engine.client_work import LocalTraining
from fedprune.engine.process import (
    ModelSpec,
    build_fedavg_process,
    build_learning_process,
    with_client_work_state,
)
from fedprune.engine.rounds import (
    run_round,
    run_rounds_concurrently,
    sample_by_cluster,
    sample_clients,
)
from fedprune.engine.updates import build_update_computation, client_updates
from fedprune.errors import ConfigError
from fedprune.finetune import finetune_and_evaluate
from fedprune.models.cnn1d import KERNEL_LAYERS
from fedprune.runs import CONFIG, RunDir
from fedprune.sparsity import masks as M
from fedprune.sparsity.layers import check_layer_names, prunable_mask_flags, scope_flags
from fedprune.sparsity.schedule import PruneHealSchedule
from fedprune.sparsity.scores import check_weights


class MaskPolicy(Protocol):
    """How an algorithm sets a cluster's mask in Phase 3 (T2 rounds)."""

    def scoring_round(self, t: int) -> bool:
        """Whether Phase-3 round ``t`` (1-based) collects statistics for a mask update."""

    def update(
        self,
        t: int,
        broadcast: list[np.ndarray],
        aggregated: list[np.ndarray],
        masks: list[np.ndarray],
        stats: dict[str, list[np.ndarray]],
    ) -> list[np.ndarray]:
        """New kernel masks after scoring round ``t``. All lists hold prunable kernels only:
        ``broadcast`` the round's starting model, ``aggregated`` its result, ``stats`` the
        federated means ``w``, ``w2``, ``grad_sign``, ``grad``."""


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """Hyper-parameters; defaults are CA-AFP's from the paper's Tables 5-6."""

    dataset: str
    method: str = "caafp"
    phases: tuple[int, int, int] = (0, 0, 50)
    clusters: int = 3
    clients_per_round: int = 10
    local_epochs: int = 3
    batch_size: int = 32
    learning_rate: float = 1e-3
    prox: float = 1e-3
    start_sparsity: float = 0.7
    target_sparsity: float = 0.7
    prune_frequency: int = 5
    churn: float = 0.05
    alpha: float | None = None
    beta: float | None = None
    gamma: float | None = None
    block: int = 1
    budget: str = "global"
    prune_layers: tuple[str, ...] | None = None  # layers whose kernels are pruned; None: all
    ft_epochs: tuple[int, ...] = (3, 25)
    seed: int = 0
    standardize: bool = False

    def resolved(self) -> PipelineConfig:
        """Fill unset scoring weights with the paper's values for the dataset, and validate."""
        config = self
        if None in (self.alpha, self.beta, self.gamma):
            if not all(v is None for v in (self.alpha, self.beta, self.gamma)):
                raise ConfigError("give all of --alpha, --beta, --gamma or none")
            a, b, g = PAPER_SCORE_WEIGHTS.get(self.dataset, (1 / 3, 1 / 3, 1 / 3))
            config = dataclasses.replace(self, alpha=a, beta=b, gamma=g)
        config.validate()
        if config.prune_layers is not None:  # in model order, each once
            chosen = tuple(n for n in KERNEL_LAYERS if n in config.prune_layers)
            config = dataclasses.replace(config, prune_layers=chosen)
        return config

    def validate(self) -> None:
        if min(self.phases) < 0 or sum(self.phases) < 1:
            raise ConfigError(f"phases T0,T1,T2 must be >= 0 and not all 0, got {self.phases}")
        for name in ("clusters", "clients_per_round", "local_epochs", "batch_size", "block"):
            check_count(name, getattr(self, name))
        if not self.ft_epochs:
            raise ConfigError("--ft-epochs needs at least one value")
        for e in self.ft_epochs:
            check_count("ft_epochs", e, minimum=0)
        check_seed(self.seed)
        if self.budget not in M.BUDGETS:
            raise ConfigError(f"budget must be one of {', '.join(M.BUDGETS)}, got {self.budget!r}")
        if self.prune_layers is not None:
            check_layer_names(self.prune_layers, KERNEL_LAYERS)
        check_nonnegative("prox", self.prox)
        check_positive("lr", self.learning_rate)
        for name in ("start_sparsity", "target_sparsity", "churn"):
            check_range(name, getattr(self, name), 0, 1)
        check_count("prune_frequency", self.prune_frequency)
        check_weights(self.alpha, self.beta, self.gamma)
        if self.phases[2] > 0:
            self.schedule()  # validates the sparsity parameters

    def schedule(self) -> PruneHealSchedule:
        return PruneHealSchedule(
            rounds=self.phases[2],
            frequency=self.prune_frequency,
            target_sparsity=self.target_sparsity,
            churn=self.churn,
            start_sparsity=self.start_sparsity,
        )


# Tables 5-6 of the paper: scoring weights per dataset.
PAPER_SCORE_WEIGHTS = {"uci_har": (0.5, 0.25, 0.25), "wisdm": (0.25, 0.25, 0.5)}


def _split(values: list[np.ndarray], flags: list[bool]) -> list[np.ndarray]:
    return [np.asarray(v) for v, f in zip(values, flags) if f]


def _merge(masks: list[np.ndarray], like: list[np.ndarray], flags: list[bool]) -> list[np.ndarray]:
    it = iter(masks)
    return [next(it) if f else np.ones_like(w, np.float32) for w, f in zip(like, flags)]


def update_masks(
    policy: MaskPolicy,
    t: int,
    broadcast: list[np.ndarray],
    aggregated: list[np.ndarray],
    masks: list[np.ndarray],
    statistics: dict[str, list[np.ndarray]],
    scope: list[bool],
) -> list[np.ndarray]:
    """New masks of all trainable weights after scoring round ``t``: the policy sees only the
    weights marked in ``scope`` (the chosen kernels; all lists are over all trainable weights),
    every other weight gets mask 1."""
    kernels = policy.update(
        t,
        _split(broadcast, scope),
        _split(aggregated, scope),
        _split(masks, scope),
        {k: _split(v, scope) for k, v in statistics.items()},
    )
    return _merge(kernels, aggregated, scope)


def _kernel_layers(model: tf.keras.Model, which: list[bool]) -> list[str]:
    """The layer names of the trainable weights marked in ``which``."""
    owners = [layer.name for layer in model.layers for _ in layer.trainable_weights]
    return [n for n, f in zip(owners, which) if f]


def _check_layerwise(config: PipelineConfig, model: tf.keras.Model, scope: list[bool]) -> None:
    """Refuse a layerwise budget that must empty whole output units of a chosen kernel."""
    if config.budget != "layerwise" or config.phases[2] == 0:
        return
    target = max(config.start_sparsity, config.target_sparsity)
    shapes = [tuple(w.shape) for w, s in zip(model.trainable_weights, scope) if s]
    names = _kernel_layers(model, scope)
    bad = [n for n, s in zip(names, shapes) if M.starves_units(s, config.block, target)]
    if bad:
        keep = [n for n in names if n not in bad]
        hint = f"--prune-layers {','.join(keep)}, " if keep else ""
        raise ConfigError(
            f"--budget layerwise with --block {config.block} at {target:.0%} sparsity would leave "
            f"output units of {', '.join(bad)} without any weight (fewer kept blocks than output "
            f"units); use {hint}a smaller --block, or --budget global"
        )


def run_pipeline(
    config: PipelineConfig,
    policy: MaskPolicy | None,
    out: str | Path,
    data_dir: str | Path | None = None,
    progress: bool = True,
) -> dict:
    """Train (or resume, or return the finished) run in ``out``; returns the summary.

    ``policy`` may be ``None`` only when T2 = 0 (dense methods).
    """
    config = config.resolved()
    if policy is None and config.phases[2] > 0:
        raise ConfigError(f"{config.method}: T2 > 0 needs a mask policy")
    record = dataclasses.asdict(config)
    existing = Path(out) / CONFIG
    run = None
    if existing.exists():
        old = json.loads(existing.read_text())
        for key, default in (("budget", "global"), ("prune_layers", None)):
            if record[key] == default and key not in old:
                del record[key]  # a run from before the option existed: its default
        run = RunDir(out, record)
        if run.finished:
            return run.read_summary()
    t0, t1, t2 = config.phases
    data = load_federated(config.dataset, config.seed, data_dir, config.standardize)
    check_at_most("clusters", config.clusters, data.num_clients, f"{config.dataset}'s clients")
    spec = ModelSpec(data.input_shape, data.num_classes, config.seed)
    init = spec.initial_weights()
    model = spec.keras()
    flags = prunable_mask_flags(model)
    scope = scope_flags(model, config.prune_layers)  # the kernels the policy prunes
    _check_layerwise(config, model, scope)  # before a new run's config.json is written
    if run is None:
        run = RunDir(out, record)
    n_params = int(sum(w.size for w in init.trainable))
    n_prunable = int(sum(w.size for w, f in zip(init.trainable, flags) if f))
    by_id = {c.client_id: c for c in data.clients}
    ids = sorted(by_id)
    training = LocalTraining(config.local_epochs, config.learning_rate, config.prox, masked=True)

    # ---- restore -------------------------------------------------------------------------
    done, wall_before = 0, 0.0
    n_units = sum(M.unit_ids(w.shape, config.block)[1] for w, f in zip(init.trainable, flags) if f)
    accounts = CommAccounts(n_params, n_prunable, n_units)
    global_w = [np.asarray(w) for w in init.trainable]
    assignment: np.ndarray | None = None
    cluster_w: dict[int, list[np.ndarray]] = {}
    cluster_m: dict[int, list[np.ndarray]] = {}
    checkpoint = run.load_checkpoint()
    if checkpoint is not None:
        done, arrays, scalars = checkpoint
        wall_before = scalars["wall_s"]
        accounts = CommAccounts(n_params, n_prunable, n_units, scalars)
        global_w = arrays["global"]
        if "assignment" in arrays:
            assignment = arrays["assignment"][0]
            for c in range(config.clusters):
                cluster_w[c] = arrays[f"cluster{c}_w"]
                cluster_m[c] = arrays[f"cluster{c}_m"]
    run.truncate_metrics(done)
    start = time.perf_counter()

    def save(step: int) -> None:
        arrays = {"global": global_w}
        if assignment is not None:
            arrays["assignment"] = [assignment]
            for c in range(config.clusters):
                arrays[f"cluster{c}_w"] = cluster_w[c]
                arrays[f"cluster{c}_m"] = cluster_m[c]
        run.save_checkpoint(
            step,
            arrays,
            {"wall_s": wall_before + time.perf_counter() - start, **accounts.scalars()},
        )

    def log(step: int, phase: str, cluster: int, clients: int, train: dict | None) -> None:
        masks = cluster_m.get(cluster)
        run.append_metrics(
            {
                "round": step,
                "phase": phase,
                "cluster": cluster,
                "clients": clients,
                "train_loss": float(train["train_loss"]) if train else "",
                "train_accuracy": float(train["train_accuracy"]) if train else "",
                "sparsity": M.sparsity(_split(masks, flags)) if masks else 0.0,
                "comm_mb_eq13": accounts.total_mb("eq13"),
                "comm_mb_payload": accounts.total_mb("payload"),
            }
        )

    total_steps = t0 + 1 + t1 + t2
    bar = tqdm(total=total_steps, initial=done, unit="round", disable=not progress)

    # ---- Phase 1: FedAvg -------------------------------------------------------------------
    if done < t0:
        process = build_fedavg_process(spec, config.local_epochs, config.learning_rate)
        state = process.set_model_weights(
            process.initialize(), tff.learning.models.ModelWeights(global_w, [])
        )
        for r in range(done + 1, t0 + 1):
            bar.set_description(f"{config.method} {config.dataset} phase 1")
            chosen = sample_clients(ids, config.clients_per_round, config.seed, r)
            output = run_round(
                process, state, [by_id[i] for i in chosen], r, config.seed, config.batch_size
            )
            state = output.state
            global_w = [np.asarray(w) for w in process.get_model_weights(state).trainable]
            accounts.model(n_prunable, 2 * len(chosen))
            log(r, "fedavg", -1, len(chosen), output.metrics["client_work"]["train"])
            save(r)
            done = r
            bar.update(1)

    # ---- Clustering (Eq. 3-4) --------------------------------------------------------------
    if done < t0 + 1:
        bar.set_description(f"{config.method} {config.dataset} clustering")
        if config.clusters == 1:  # nothing to cluster: no computation, no communication
            assignment = np.zeros(len(ids), dtype=np.int64)
        else:
            computation = build_update_computation(
                spec, LocalTraining(1, config.learning_rate, statistics=False)
            )
            updates = client_updates(
                computation,
                tff.learning.models.ModelWeights(global_w, []),
                [by_id[i] for i in ids],
                config.seed,
                config.batch_size,
                round_num=t0 + 1,
            )
            assignment = cluster_clients(updates, config.clusters)
            accounts.model(n_prunable, 2 * len(ids), "clustering")
        for c in range(config.clusters):
            cluster_w[c] = [w.copy() for w in global_w]
            cluster_m[c] = [np.ones_like(w, np.float32) for w in global_w]
        done = t0 + 1
        log(done, "clustering", -1, len(ids), None)
        save(done)
        bar.update(1)
    (run.path / "clusters.json").write_text(
        json.dumps({str(i): int(a) for i, a in zip(ids, assignment)}, indent=2) + "\n"
    )
    cluster_of = dict(zip(ids, assignment.tolist()))

    # ---- Phases 2-3: cluster training, then prune-and-heal -----------------------------------
    if done < total_steps:
        plain = build_learning_process(spec, training)
        measuring = build_learning_process(spec, dataclasses.replace(training, statistics=True))
        base = plain.initialize()
    for step in range(done + 1, total_steps + 1):
        phase3_t = step - (t0 + 1 + t1)  # 1-based Phase-3 round, <= 0 in Phase 2
        phase = "prune" if phase3_t >= 1 else "cluster"
        bar.set_description(f"{config.method} {config.dataset} phase {3 if phase3_t >= 1 else 2}")
        measure = phase3_t >= 1 and policy.scoring_round(phase3_t)
        chosen = sample_by_cluster(cluster_of, config.clients_per_round, config.seed, step)
        process = measuring if measure else plain
        jobs = []
        for c, members in chosen.items():
            state = process.set_model_weights(
                base, tff.learning.models.ModelWeights(cluster_w[c], [])
            )
            anchor = {"anchor": global_w} if config.prox > 0 else {}
            state = with_client_work_state(state, mask=cluster_m[c], **anchor)
            jobs.append((process, state, [by_id[i] for i in members]))
        outputs = run_rounds_concurrently(jobs, step, config.seed, config.batch_size)
        for (c, members), output in zip(chosen.items(), outputs):
            n_active = int(sum(m.sum() for m in _split(cluster_m[c], flags)))
            accounts.model(n_active, 2 * len(members))
            new_w = [np.asarray(w) for w in process.get_model_weights(output.state).trainable]
            metrics = output.metrics["client_work"]
            if measure:
                accounts.statistics(n_active, len(members))
                cluster_m[c] = update_masks(
                    policy,
                    phase3_t,
                    cluster_w[c],
                    new_w,
                    cluster_m[c],
                    metrics["statistics"],
                    scope,
                )
                new_w = M.apply(new_w, cluster_m[c])
            cluster_w[c] = new_w
            log(step, phase, c, len(members), metrics["train"])
        save(step)
        done = step
        bar.update(1)
    bar.close()

    # ---- Phase 4: fine-tuning under the fixed masks (Eq. 12) --------------------------------
    np.savez(
        run.path / "cluster_models.npz",
        **{f"cluster{c}_{i}": w for c in cluster_w for i, w in enumerate(cluster_w[c])},
    )
    np.savez(
        run.path / "masks.npz",
        **{
            f"cluster{c}_{i}": m.astype(np.uint8)
            for c in cluster_m
            for i, m in enumerate(_split(cluster_m[c], flags))
        },
    )
    finetune, personal_sparsity = finetune_and_evaluate(
        run.path,
        data,
        {i: M.apply(cluster_w[cluster_of[i]], cluster_m[cluster_of[i]]) for i in ids},
        {i: _split(cluster_m[cluster_of[i]], flags) for i in ids},
        config,
        progress,
    )
    kernel_names = _kernel_layers(model, flags)
    summary = {
        "method": config.method,
        "dataset": config.dataset,
        "seed": config.seed,
        "phases": list(config.phases),
        "num_clients": data.num_clients,
        "params": n_params,
        "prunable_params": n_prunable,
        "clusters": {str(c): int(np.sum(assignment == c)) for c in range(config.clusters)},
        "cluster_sparsity": {str(c): M.sparsity(_split(cluster_m[c], flags)) for c in cluster_m},
        "sparsity": personal_sparsity,
        "prune_layers": _kernel_layers(model, scope),
        "pruned_params": int(sum(w.size for w, s in zip(init.trainable, scope) if s)),
        "sparsity_pruned_layers": float(
            np.mean([M.sparsity(_split(cluster_m[cluster_of[i]], scope)) for i in ids])
        ),
        "layer_sparsity": {
            str(c): {n: M.sparsity([k]) for n, k in zip(kernel_names, _split(m, flags))}
            for c, m in cluster_m.items()
        },
        "comm_mb_eq13": accounts.total_mb("eq13"),
        "comm_mb_payload": accounts.total_mb("payload"),
        "comm_mb_eq13_by_kind": {c: v / 1e6 for c, v in accounts.eq13.items()},
        "comm_mb_payload_by_kind": {c: v / 1e6 for c, v in accounts.payload.items()},
        "wall_s": wall_before + time.perf_counter() - start,
        "finetune": finetune,
    }
    run.write_summary(summary)
    return summary
