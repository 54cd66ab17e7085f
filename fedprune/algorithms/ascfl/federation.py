"""The clients of a clustered image run (AS-CFL, CFL, CFL with a fixed K, IFCA): the rotated,
label-skewed federation of a built-in dataset or your own images, loaded from the recipe the
run records (:func:`fedprune.data.registry.rotated_images_recipe`), or the clients a caller
hands in; numbered as the methods index them and checked against ``--clients``
(:func:`prepared`). What the summary says of them: the partition's options
(:func:`partition_record`) and the deploy manifest with which ``edge-export`` rebuilds each
client's data and model (:func:`deploy_manifest`).
"""

from __future__ import annotations

import dataclasses
import os

from fedprune.configs.ascfl import ClusteredImageConfig
from fedprune.configs.protocol import dataset_label, is_user_file
from fedprune.data.registry import rotated_federation, rotated_images_recipe
from fedprune.data.rotated_partition import RotatedFederatedData
from fedprune.errors import ConfigError
from fedprune.models.spec import ModelSpec
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


def prepared(
    config: ClusteredImageConfig,
    given: RotatedFederatedData | None = None,
    data_dir: str | os.PathLike | None = None,
) -> tuple[RotatedFederatedData, tuple[int, ...]]:
    """The federation a run of ``config`` trains on, :func:`numbered`, and the clients' own
    ids: ``given`` (then ``data_dir`` is not read; the caller makes it match ``config``), else
    :func:`build_federation`'s. Refused (``ConfigError``) where its clients are not
    ``config.num_clients``: your images name their clients, and the error names their number."""
    fed = given
    if fed is None:
        fed = build_federation(config, None if data_dir is None else str(data_dir))
    fed, ids = numbered(fed)
    if fed.num_clients != config.num_clients:
        raise ConfigError(
            f"--clients {config.num_clients} but {dataset_label(config.dataset)} holds "
            f"{fed.num_clients} clients; give --clients {fed.num_clients}"
        )
    return fed, ids


def partition_record(config: ClusteredImageConfig) -> dict:
    """The summary's entries of the partition (``labels``, ``alpha``: Dirichlet only): none
    for your images, which were not partitioned."""
    if is_user_file(config.dataset):
        return {}
    return {"labels": config.labels, "alpha": config.alpha}


def deploy_manifest(
    config: ClusteredImageConfig, spec: ModelSpec, fed: RotatedFederatedData
) -> dict:
    """The ``clustered`` deploy manifest of a run (as JSON): the data recipe, the model's input
    shape and name and the images' class names, with which ``edge-export`` gives each client
    its cluster's model (:func:`fedprune.runs.deploy.image_manifest`)."""
    return image_manifest(
        rotated_images_recipe(config),
        spec.input_shape,
        fed.federated.class_names,
        spec.recorded_model,
    ).to_json()
