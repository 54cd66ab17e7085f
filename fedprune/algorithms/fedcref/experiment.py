"""A FedCRef experiment: the simulated system (paper Sec. 5.2-5.4), the run, its files.

Builds the clients from a real dataset (``partition_clients``), the initial clustering
(``dirty`` uniform with ``dirtiness``, or ``kmeans-ae``), runs
:class:`~fedprune.algorithms.fedcref.algorithm.FedCRef` one iteration per step of the shared
round loop, and writes the run directory: ``config.json``, ``metrics.csv`` (one row per
iteration: mean client ACC, communities found vs true categories, wrong associations,
isolated clusters, active clients, wall time), ``checkpoint.npz`` (resume after an
interruption; removed once the run is finished), ``community_models.npz`` (the final
community autoencoders, for edge export), ``assignments.npz`` and ``summary.json`` (with the
``deploy`` manifest). Ground-truth labels are used here only to build the system and to
evaluate it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from fedprune.algorithms.fedcref.algorithm import FedCRef, FedCRefState, IterationReport
from fedprune.algorithms.fedcref.evaluation import (
    majority_labels,
    mean_client_acc,
    wrong_association_pct,
)
from fedprune.algorithms.fedcref.initial import kmeans_on_embeddings
from fedprune.algorithms.fedcref.local_models import LocalTrainer, cluster_seed
from fedprune.algorithms.fedcref.system_size import check_fits
from fedprune.configs.fedcref import FedCRefRunConfig, SystemConfig
from fedprune.data.clustered_partition import ClientImages, dirty_uniform, partition_clients
from fedprune.data.images import load_images
from fedprune.engine import interrupts
from fedprune.engine.loop import Step, run_rounds
from fedprune.runs import CHECKPOINT, RunDir, artefacts
from fedprune.runs.deploy import DeployManifest, image_clients_recipe
from fedprune.runs.names import COMMUNITY_MODELS


def build_system(
    system: SystemConfig, seed: int, data_dir: str | os.PathLike | None, epochs: int
) -> tuple[list[ClientImages], list[np.ndarray]]:
    """The clients and their initial clusterings; an impossible ``--clients`` or
    ``--samples-per-class`` is refused as soon as the class sizes are known."""
    data = load_images(system.dataset, system.split, data_dir)
    check_fits(
        np.unique(data.y, return_counts=True)[1],
        system.num_clients,
        system.samples_per_class,
        system.overlap,
        system.max_classes,
        f"{system.dataset} ({system.split})",
    )
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
    interrupts.raise_if_received()
    return clients, initial


def run_fedcref_experiment(
    config: FedCRefRunConfig,
    out: str | os.PathLike,
    data_dir: str | os.PathLike | None = None,
    progress: bool = True,
) -> dict:
    """Run (or resume, or return the finished) experiment in ``out``; returns the summary."""
    system, params = config.system(), config.algorithm()
    recorded = config.recorded()
    run = RunDir.existing(out, recorded)
    if run is not None and run.finished:
        return run.read_summary()
    # the system is built (and its parameters checked) before config.json is written, so an
    # impossible setting leaves no run directory that would refuse the corrected command
    clients, initial = build_system(system, params.seed, data_dir, params.local_epochs)
    run = run or RunDir(out, recorded)
    labels = [c.labels for c in clients]
    xs = [c.x for c in clients]
    ks = [c.num_classes for c in clients]
    true_categories = len(set().union(*(c.classes for c in clients)))
    algorithm = FedCRef(xs, ks, initial, params)

    def step(t: int, state: FedCRefState) -> Step[FedCRefState]:
        report: IterationReport = algorithm.iterate(state)
        majority = majority_labels(report.clusters, report.members, labels)
        row = {
            "iteration": report.iteration,
            "acc": round(mean_client_acc(labels, state.assignments), 6),
            "communities": len(report.communities),
            "true_categories": true_categories,
            "wrong_assoc_pct": round(wrong_association_pct(report.edges, majority), 4),
            "associations": len(report.edges),
            "isolated": len(report.isolated),
            "clusters": len(report.clusters),
            "active_clients": int(state.active.sum()),
            "seconds": round(report.seconds, 2),
        }
        postfix = {"acc": str(row["acc"]), "comm": str(row["communities"])}
        # nothing of an iteration during which SIGINT came is saved, even where TensorFlow
        # handled the KeyboardInterrupt itself (see fedprune.engine.interrupts)
        interrupts.raise_if_received()
        return Step(state, [row], {**postfix, "iso": str(row["isolated"])}, stop=state.done)

    result = run_rounds(
        run,
        algorithm.initial_state,
        lambda done, arrays, _scalars: FedCRefState.from_checkpoint(
            done, arrays, str(run.path / CHECKPOINT)
        ),
        step,
        params.max_iterations,
        desc=f"fedcref {system.dataset} d={system.dirtiness}",
        progress=progress,
        unit="it",
        round_key="iteration",
        finished=lambda state: state.done,
        wall_column="wall_s",
    )
    final = result.state
    artefacts.write_community_models(run.path, final.community_models)
    artefacts.write_assignments(run.path, final.assignments)
    rows = run.metrics_rows()
    last = rows[-1]
    summary = {
        "method": "fedcref",
        "dataset": system.dataset,
        "split": system.split,
        "init": system.init,
        "dirtiness": system.dirtiness if system.init == "dirty" else None,
        "seed": params.seed,
        "num_clients": system.num_clients,
        "mean_k": float(np.mean(ks)),
        "acc_init": round(mean_client_acc(labels, initial), 6),
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
        "deploy": DeployManifest(
            kind="community",
            models=COMMUNITY_MODELS,
            model="autoencoder",
            input_shape=(int(xs[0].shape[1]),),
            labels=None,
            normalization="pixels scaled to [0, 1]",
            data=image_clients_recipe(recorded),
        ).to_json(),
    }
    interrupts.raise_if_received()
    run.write_summary(summary)
    run.remove_checkpoint()  # the finished state is in the files above
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
