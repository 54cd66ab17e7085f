"""A run of AS-CFL or a baseline (CFL, CFL with a fixed K, IFCA; FedAvg = IFCA with K = 1)
on the shared round loop and run directory.

The federation is :func:`fedprune.data.rotated_partition.partition_rotated` of the official
splits (or one the caller gives); the method is the rule of the configuration's class
(:func:`.rules.rule_of`), run by the clustered round of :mod:`.compose`. Files in ``--out``:
``config.json``, ``metrics.csv`` (per round: learning rate, mean and pooled client test
accuracy, training loss, clusters, ARI against the rotation groups, Jaccard stability of
memberships, uplink/downlink MB, low-rank rank), ``checkpoint.npz`` while running,
``clusters.json`` (each client's final cluster), ``cluster_models.npz`` (each cluster's final
model) and ``summary.json`` (final and peak accuracy, rounds to 90 % of the peak, clusters,
ARI, stability, bytes, (ε, δ) when noise is on, wall time, and the ``clustered`` deploy
manifest with which ``edge-export`` gives each client its cluster's model). With
``--clusters auto`` (CFL with a fixed K, IFCA) a one-shot pass chooses K and the first
clusters before round 1 (:mod:`.auto_clusters`): ``cluster_choice.json`` records how, the
summary's ``clusters_chosen`` the K.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from fedprune.algorithms.ascfl import auto_clusters, compose, metrics, rules
from fedprune.configs.ascfl import ClusteredImageConfig
from fedprune.configs.har import AUTO
from fedprune.configs.protocol import dataset_label, is_user_file
from fedprune.data.registry import rotated_federation, rotated_images_recipe
from fedprune.data.rotated_partition import RotatedFederatedData
from fedprune.engine.compose import Inputs, RunPlan, write_clustering
from fedprune.engine.loop import RoundsResult
from fedprune.errors import ConfigError
from fedprune.models.spec import ModelSpec
from fedprune.models.user import UserModel
from fedprune.privacy import accounting
from fedprune.runs import RunDir
from fedprune.runs.deploy import image_manifest


def build_federation(
    config: ClusteredImageConfig, data_dir: str | os.PathLike | None
) -> RotatedFederatedData:
    """The rotated, label-skewed federation of ``config.dataset``, or your own images
    (:mod:`fedprune.data.user_images`) as their clients and proxy set: the recipe the run
    records for export (:func:`fedprune.data.registry.rotated_images_recipe`), loaded."""
    return rotated_federation(rotated_images_recipe(config), data_dir)


def numbered(fed: RotatedFederatedData) -> tuple[RotatedFederatedData, tuple[int, ...]]:
    """``fed`` with its clients numbered 0 .. N-1 in their order, as the methods index them
    (``cluster_of[i]`` is the cluster of client ``i``), and the clients' own ids in that order
    (your images' ids; 0 .. N-1 for a built-in dataset), by which the run's files name them."""
    ids = tuple(int(c.client_id) for c in fed.clients)
    clients = tuple(dataclasses.replace(c, client_id=i) for i, c in enumerate(fed.clients))
    federated = dataclasses.replace(fed.federated, clients=clients)
    return dataclasses.replace(fed, federated=federated), ids


def model_spec(
    config: ClusteredImageConfig, fed: RotatedFederatedData, model: str | UserModel | None = None
) -> ModelSpec:
    """``config.model`` (or ``model``, your own) on ``fed``'s images, with as many classes as
    its labels show (your images: as many as their class names)."""
    num_classes = int(max(max(c.y_train.max() for c in fed.clients), fed.proxy_y.max())) + 1
    num_classes = max(num_classes, len(fed.federated.class_names))
    chosen = config.model if model is None else model
    return ModelSpec(fed.federated.input_shape, num_classes, seed=config.seed, model=chosen)


class ClusteredImagesRun(RunPlan[ClusteredImageConfig], family=ClusteredImageConfig):
    """A run of a clustered image method for the composer (:mod:`fedprune.engine.compose`):
    the federation (given or built) with its clients counted, the model; then the one-shot
    pass of ``--clusters auto`` and the rule's rounds; then the clusters, the cluster
    models and the summary. The checkpoint goes once the run is finished (the final state is
    in ``clusters.json`` and ``cluster_models.npz``).

    Its runner, :func:`run_clustered_images`, takes ``federation``: the clients to run on
    instead of :func:`build_federation`'s (then ``data_dir`` is not read; the caller makes
    it match ``config``, whose recorded fields name it in ``config.json``); ``spec``: the
    model instead of :func:`model_spec`'s; ``model``: your own model
    (:mod:`fedprune.models.user`), as ``config.model`` names it (a run of your model
    records its architecture in ``model.json``)."""

    keeps_checkpoint, records_file = False, True
    takes = ("federation", "spec", "model")

    def __init__(self, config: ClusteredImageConfig, inputs: Inputs):
        super().__init__(config, inputs)
        fed = inputs.get("federation")
        if fed is None:
            data_dir = inputs.data_dir
            fed = build_federation(config, None if data_dir is None else str(data_dir))
        fed, self.ids = numbered(fed)
        if fed.num_clients != config.num_clients:  # your images name their clients
            raise ConfigError(
                f"--clients {config.num_clients} but {dataset_label(config.dataset)} holds "
                f"{fed.num_clients} clients; give --clients {fed.num_clients}"
            )
        self.fed = fed
        trained = inputs.model_of(config)
        self.spec = inputs.get("spec") or model_spec(config, fed, trained)
        if isinstance(trained, UserModel):  # checked before anything is written
            self.architecture = self.spec.keras()

    def start(self, run: RunDir) -> tuple[compose.ClusteredRounds, int]:
        config, spec, fed = self.config, self.spec, self.fed
        start = auto_clusters.settle(config, spec, fed, run) if config.clusters == AUTO else None
        rule = rules.rule_of(config, spec, None if start is None else start.k)
        self.start_choice = start
        self.params = int(sum(w.size for w in rule.spec.initial_weights().trainable))
        pass_mb = 4 * self.params * config.num_clients / compose.MB if start is not None else 0.0
        return compose.ClusteredRounds(config, rule, fed, pass_mb, start), config.rounds

    def summary(self, run: RunDir, result: RoundsResult[compose.ClusterState]) -> dict:
        """Each client's final cluster (by the client's own id) and each cluster's final
        model, what edge-export deploys to a client (the manifest); the summary of the
        rounds' metrics."""
        config, start, state = self.config, self.start_choice, result.state
        clusters = dict(zip(map(int, self.ids), map(int, state.cluster_of), strict=True))
        choice = start and start.choice.file_record("update", config.max_clusters)
        write_clustering(run, clusters, dict(enumerate(state.models)), choice)
        rows = run.metrics_rows()
        accs = [float(r["acc"]) for r in rows]
        last = rows[-1]
        summary = {
            # the partition's; your images were not partitioned (alpha: Dirichlet only)
            **self.summary_head(
                {}
                if is_user_file(config.dataset)
                else {"labels": config.labels, "alpha": config.alpha}
            ),
            "rounds": result.rounds,
            "final_acc": accs[-1],
            "peak_acc": max(accs),
            "rounds_to_90pct_peak": metrics.rounds_to_fraction_of_peak(accs, 0.9),
            "clusters": int(last["clusters"]),
            **({"clusters_chosen": start.k} if start is not None else {}),
            "ari": float(last["ari"]) if last["ari"] != "" else None,
            "mean_stability": float(np.mean([float(r["stability"]) for r in rows[1:]] or [1.0])),
            "uplink_mb": float(sum(float(r["uplink_mb"]) for r in rows)),
            "downlink_mb": float(sum(float(r["downlink_mb"]) for r in rows)),
            "params": self.params,
            "wall_s": float(last["wall_s"]),
            "deploy": image_manifest(
                rotated_images_recipe(config),
                self.spec.input_shape,
                self.fed.federated.class_names,
                self.spec.recorded_model,
            ).to_json(),
        }
        if any(r.get("uplink_lowrank_mb") for r in rows):
            # rounds without the low-rank step (the FedAvg warm-up) upload the full update
            summary["uplink_lowrank_mb"] = float(
                sum(float(r.get("uplink_lowrank_mb") or r["uplink_mb"]) for r in rows)
            )
        if config.noise_multiplier > 0:
            spent = accounting.privacy_spent(
                config.noise_multiplier,
                result.rounds,
                compose.DELTA,
                sampling_rate=1.0 - config.client_dropout,
            )
            summary["privacy"] = {"epsilon": float(spent.epsilon), "delta": compose.DELTA}
        return summary


run_clustered_images = ClusteredImagesRun.run
"""Run (or resume, or return the finished) run of ``config`` in ``out``; returns the summary:
``run_clustered_images(config, out, data_dir=None, progress=True, *, federation=None,
spec=None, model=None)``, the keywords as :class:`ClusteredImagesRun` says."""
