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

from fedprune.algorithms.ascfl import auto_clusters, compose, rules
from fedprune.configs.ascfl import ClusteredImageConfig
from fedprune.configs.har import AUTO
from fedprune.configs.protocol import dataset_label, settled_sha256
from fedprune.data.registry import rotated_federation, rotated_images_recipe
from fedprune.data.rotated_partition import RotatedFederatedData
from fedprune.errors import ConfigError
from fedprune.models.spec import ModelSpec
from fedprune.models.user import UserModel, resolve, write_architecture
from fedprune.runs import RunDir, recorded_config


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


def run_clustered_images(
    config: ClusteredImageConfig,
    out: str | os.PathLike,
    data_dir: str | os.PathLike | None = None,
    progress: bool = True,
    *,
    federation: RotatedFederatedData | None = None,
    spec: ModelSpec | None = None,
    model: UserModel | None = None,
) -> dict:
    """Run (or resume, or return the finished) run in ``out``; returns the summary.

    ``federation``: the clients to run on instead of :func:`build_federation`'s (then
    ``data_dir`` is not read; the caller makes it match ``config``, whose recorded fields
    name it in ``config.json``). ``spec``: the model instead of :func:`model_spec`'s.
    ``model``: your own model (:mod:`fedprune.models.user`), as ``config.model`` names it;
    a run of your model records its architecture in ``model.json``."""
    sha = settled_sha256(config, recorded_config(out))
    config = dataclasses.replace(config, dataset_sha256=sha)
    recorded = config.recorded()
    run = RunDir.existing(out, recorded)
    if run is not None and run.finished:
        return run.read_summary()
    fed = federation
    if fed is None:
        fed = build_federation(config, None if data_dir is None else str(data_dir))
    fed, ids = numbered(fed)
    if fed.num_clients != config.num_clients:  # your images name their clients
        raise ConfigError(
            f"--clients {config.num_clients} but {dataset_label(config.dataset)} holds "
            f"{fed.num_clients} clients; give --clients {fed.num_clients}"
        )
    trained = resolve(config.model, model, out)
    spec = spec if spec is not None else model_spec(config, fed, trained)
    mine = spec.keras() if isinstance(trained, UserModel) else None  # checked before writing
    run = run or RunDir(out, recorded)
    if mine is not None:
        write_architecture(mine, run.path)
    start = auto_clusters.settle(config, spec, fed, run) if config.clusters == AUTO else None
    rule = rules.rule_of(config, spec, None if start is None else start.k)
    return compose.run_clustered(config, rule, fed, run, progress, start, client_ids=ids)
