"""A FedCRef experiment: the simulated system (paper Sec. 5.2-5.4), the run, its files.

Builds the clients from a real dataset (``partition_clients``), the initial clustering
(``dirty`` uniform with ``dirtiness``, or ``kmeans-ae``), runs :func:`run_fedcref`, and
writes the run directory: ``config.json``, ``metrics.csv`` (one row per iteration: mean client
ACC, communities found vs true categories, wrong associations, isolated clusters, active
clients), ``checkpoint.npz`` (resume after an interruption), ``community_models.npz`` (the
final community autoencoders, for edge export), ``assignments.npz`` and ``summary.json``.
Ground-truth labels are used here only to build the system and to evaluate it.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from tqdm import tqdm

from fedprune.algorithms.fedcref.algorithm import (
    FedCRefConfig,
    FedCRefState,
    IterationReport,
    run_fedcref,
)
from fedprune.algorithms.fedcref.evaluation import (
    majority_labels,
    mean_client_acc,
    wrong_association_pct,
)
from fedprune.algorithms.fedcref.initial import kmeans_on_embeddings
from fedprune.algorithms.fedcref.local_models import LocalTrainer, cluster_seed
from fedprune.checks import check_count, check_range
from fedprune.data.clustered_partition import ClientImages, dirty_uniform, partition_clients
from fedprune.data.images import load_images
from fedprune.errors import ConfigError, DataError
from fedprune.runs import RunDir

INITS = ("dirty", "kmeans-ae")
COMMUNITY_MODELS = "community_models.npz"


@dataclasses.dataclass(frozen=True)
class SystemConfig:
    """The simulated federated system (paper Table 1) and its initial clustering."""

    dataset: str = "mnist"
    split: str = "train"
    num_clients: int = 25
    samples_per_class: int = 500
    overlap: float = 0.0
    init: str = "dirty"
    dirtiness: float = 0.3
    max_classes: int | None = None  # upper bound of K_i; None = K_G // 2 (the paper)

    def __post_init__(self) -> None:
        if self.init not in INITS:
            raise ConfigError(f"unknown --init {self.init!r}; choose one of {', '.join(INITS)}")
        if self.init == "dirty":
            check_range("dirtiness", self.dirtiness, 0, 1, high_open=True)
        check_range("overlap", self.overlap, 0, 1)
        check_count("clients", self.num_clients, minimum=2)
        check_count("samples_per_class", self.samples_per_class)
        if self.max_classes is not None:
            check_count("max_classes", self.max_classes, minimum=2)


def _recorded(system: SystemConfig) -> dict:
    """The system's fields for config.json; an unset ``max_classes`` is left out, so run
    directories written before the option existed still match."""
    fields = dataclasses.asdict(system)
    if fields["max_classes"] is None:
        del fields["max_classes"]
    return fields


def build_system(
    system: SystemConfig, seed: int, data_dir: str | os.PathLike | None, epochs: int
) -> tuple[list[ClientImages], list[np.ndarray]]:
    """The clients and their initial clusterings."""
    data = load_images(system.dataset, system.split, data_dir)
    clients = partition_clients(
        data,
        system.num_clients,
        system.samples_per_class,
        system.overlap,
        seed,
        max_classes=system.max_classes,
    )
    if system.init == "dirty":
        initial = [
            dirty_uniform(c, system.dirtiness, cluster_seed(seed, 0, c.client_id)) for c in clients
        ]
    else:
        trainer = LocalTrainer(clients[0].x.shape[1], epochs)
        initial = [
            kmeans_on_embeddings(c.x, c.num_classes, trainer, cluster_seed(seed, 0, c.client_id))
            for c in clients
        ]
    return clients, initial


def _save_state(run: RunDir, state: FedCRefState) -> None:
    keys = sorted(state.models)
    run.save_checkpoint(
        state.iteration,
        {
            "assignments": state.assignments,
            "active": [state.active.astype(np.int8)],
            "model_keys": [np.array(keys, dtype=np.int64).reshape(-1, 2)],
            "model_weights": [w for k in keys for w in state.models[k]],
            "community_weights": [w for m in state.community_models for w in m],
            "stop_history": [np.array(state.stop_history, dtype=np.int64).reshape(-1, 2)],
            # a run interrupted after its last iteration's checkpoint must not train one more
            # on resume: the stop decision is part of the state
            "stop": [np.array(state.stop_reason if state.done else "")],
        },
    )


def _load_state(run: RunDir) -> FedCRefState | None:
    loaded = run.load_checkpoint()
    if loaded is None:
        return None
    iteration, arrays, _ = loaded
    keys = [tuple(map(int, k)) for k in arrays["model_keys"][0]]
    flat = arrays["model_weights"]
    per_model = len(flat) // max(len(keys), 1)  # weight arrays per autoencoder
    cw = arrays.get("community_weights", [])
    if not keys or per_model * len(keys) != len(flat) or len(cw) % per_model:
        raise DataError(f"{run.path}: checkpoint.npz is inconsistent; delete it to start over")
    models = {k: flat[per_model * n : per_model * (n + 1)] for n, k in enumerate(keys)}
    reason = str(arrays["stop"][0]) if "stop" in arrays else ""  # older checkpoints: not done
    return FedCRefState(
        iteration=iteration,
        assignments=[a.astype(np.int64) for a in arrays["assignments"]],
        active=arrays["active"][0].astype(bool),
        models=models,
        stop_history=[tuple(map(int, h)) for h in arrays["stop_history"][0]],
        community_models=[cw[i : i + per_model] for i in range(0, len(cw), per_model)],
        done=bool(reason),
        stop_reason=reason,
    )


def run_fedcref_experiment(
    system: SystemConfig,
    config: FedCRefConfig,
    out: str | os.PathLike,
    data_dir: str | os.PathLike | None = None,
    progress: bool = True,
) -> dict:
    """Run (or resume, or return the finished) experiment in ``out``; returns the summary."""
    recorded = {"method": "fedcref", **_recorded(system), **dataclasses.asdict(config)}
    if (Path(out) / "summary.json").exists():
        return RunDir(out, recorded).read_summary()
    started = time.perf_counter()
    # the system is built (and its parameters checked) before config.json is written, so an
    # impossible setting leaves no run directory that would refuse the corrected command
    clients, initial = build_system(system, config.seed, data_dir, config.local_epochs)
    run = RunDir(out, recorded)
    labels = [c.labels for c in clients]
    xs = [c.x for c in clients]
    ks = [c.num_classes for c in clients]
    true_categories = len(set().union(*(c.classes for c in clients)))
    acc_init = mean_client_acc(labels, initial)

    state = _load_state(run)
    run.truncate_metrics(state.iteration if state else 0, round_key="iteration")
    previous_wall = float(run.metrics_rows()[-1]["wall_s"]) if run.metrics_rows() else 0.0
    bar = tqdm(
        total=config.max_iterations,
        initial=state.iteration if state else 0,
        desc=f"fedcref {system.dataset} d={system.dirtiness}",
        unit="it",
        disable=not progress,
    )

    def record(report: IterationReport) -> None:
        assignments = report.state.assignments
        majority = majority_labels(report.clusters, report.members, labels)
        row = {
            "iteration": report.iteration,
            "acc": round(mean_client_acc(labels, assignments), 6),
            "communities": len(report.communities),
            "true_categories": true_categories,
            "wrong_assoc_pct": round(wrong_association_pct(report.edges, majority), 4),
            "associations": len(report.edges),
            "isolated": len(report.isolated),
            "clusters": len(report.clusters),
            "active_clients": int(report.state.active.sum()),
            "seconds": round(report.seconds, 2),
            "wall_s": round(previous_wall + time.perf_counter() - started, 2),
        }
        run.append_metrics(row)
        _save_state(run, report.state)
        bar.update(1)
        bar.set_postfix(acc=row["acc"], comm=row["communities"], iso=row["isolated"])

    final = run_fedcref(xs, ks, initial, config, on_iteration=record, state=state)
    bar.close()
    rows = run.metrics_rows()
    np.savez(
        run.path / COMMUNITY_MODELS,
        **{f"c{g}_{k}": w for g, m in enumerate(final.community_models) for k, w in enumerate(m)},
    )
    np.savez(
        run.path / "assignments.npz", **{f"client{i}": a for i, a in enumerate(final.assignments)}
    )
    last = rows[-1]
    summary = {
        "method": "fedcref",
        "dataset": system.dataset,
        "split": system.split,
        "init": system.init,
        "dirtiness": system.dirtiness if system.init == "dirty" else None,
        "seed": config.seed,
        "num_clients": system.num_clients,
        "mean_k": float(np.mean(ks)),
        "acc_init": round(acc_init, 6),
        "acc_final": float(last["acc"]),
        "communities": int(last["communities"]),
        "true_categories": true_categories,
        "wrong_assoc_pct": float(last["wrong_assoc_pct"]),
        "clusters_total": int(rows[0]["clusters"]),
        "isolated_start": int(rows[0]["isolated"]),
        "isolated_end": int(last["isolated"]),
        "iterations": int(last["iteration"]),
        "stop_reason": final.stop_reason,
        "wall_s": float(last["wall_s"]),
    }
    run.write_summary(summary)
    (run.path / "checkpoint.npz").unlink(missing_ok=True)
    return summary


def summary_line(summary: Mapping) -> str:
    """One human line of a finished run."""
    return (
        f"ACC {summary['acc_init']:.3f} -> {summary['acc_final']:.3f}, communities "
        f"{summary['communities']}/{summary['true_categories']}, wrong associations "
        f"{summary['wrong_assoc_pct']:.1f} %, isolated {summary['isolated_start']} -> "
        f"{summary['isolated_end']}, {summary['iterations']} iterations "
        f"({summary['stop_reason']}), {summary['wall_s']:.0f} s"
    )
