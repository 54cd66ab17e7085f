"""One entry point per dataset: locate (or download) the files, parse once, cache, partition."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from fedprune.checks import is_user_file
from fedprune.data import cache, sources
from fedprune.data.clustered_partition import ClientImages, partition_clients
from fedprune.data.images import load_images
from fedprune.data.partition import FederatedData, partition_by_subject, standardize_all
from fedprune.data.rotated_partition import RotatedFederatedData, partition_rotated
from fedprune.data.scenarios import inject_label_noise, keep_classes_per_client
from fedprune.data.tables import ClientTable, read_table_npz
from fedprune.data.uci_har import read_uci_har
from fedprune.data.user import file_sha256, read_npz
from fedprune.data.user_images import read_images_npz, to_federation
from fedprune.data.windows import WindowedDataset
from fedprune.data.wisdm import read_wisdm
from fedprune.errors import DataError


def _read_uci_har(path: Path) -> tuple[WindowedDataset, str]:
    data = read_uci_har(path)
    return data, f"UCI-HAR: {len(data.y)} windows from {path}"


def _read_wisdm(path: Path) -> tuple[WindowedDataset, str]:
    data, report = read_wisdm(path)
    return data, report.summary()


READERS: dict[str, Callable[[Path], tuple[WindowedDataset, str]]] = {
    "uci_har": _read_uci_har,
    "wisdm": _read_wisdm,
}
DATASETS = tuple(READERS)


def load_windows(
    name: str,
    data_dir: str | os.PathLike | None = None,
    download: bool = True,
    use_cache: bool = True,
    verbose: bool = True,
) -> WindowedDataset:
    """The windows of dataset ``name`` read from its official files (cached as ``.npz``), or
    of your own ``.npz`` file when ``name`` is its path (:func:`fedprune.data.user.read_npz`).

        The parse note (e.g. how many malformed WISDM records were skipped) is printed to stderr
        every time, from the cache too, so it is never hidden. A cache entry that is unreadable or
        invalid is dropped with one note by :func:`fedprune.data.cache.load`, and the source is
        parsed again and the entry rewritten; a cache that cannot be written is a note, not an
        error, since the data itself was read.
    """
    if is_user_file(name):  # your own file: read as it is now, never cached
        data = read_npz(name)
        if verbose:
            print(f"{data.name}: {len(data.y)} windows from {name}", file=sys.stderr)
        return data
    source_path = sources.locate(name, data_dir, download=download)
    reader = READERS[name]
    cache_path = cache.cache_dir() / f"{name}-{cache.cache_key(source_path, {})}.npz"
    hit = cache.load(cache_path, name) if use_cache else None
    if hit is None:
        data, note = reader(source_path)
        if use_cache:
            try:
                cache.save(cache_path, data, note)
            except OSError as err:
                print(
                    f"fedprune: note: cannot write cache entry {cache_path} ({err}); "
                    "continuing without it",
                    file=sys.stderr,
                )
    else:
        data, note = hit
    if verbose:
        print(note, file=sys.stderr)
    return data


def load_federated(
    name: str,
    seed: int = 0,
    data_dir: str | os.PathLike | None = None,
    standardize: bool = False,
    test_fraction: float = 0.2,
    verbose: bool = True,
    split: str = "time-ordered",
    label_noise: tuple[float, float] | None = None,
    classes_per_client: int | None = None,
) -> FederatedData:
    """Dataset ``name`` as one client per subject with an 80/20 split per client and class
    (``split``: :data:`fedprune.data.partition.SPLITS`), then the scenarios of
    :mod:`fedprune.data.scenarios` (``classes_per_client`` first, then ``label_noise`` =
    (client fraction, window fraction) on the windows kept), then, if ``standardize``, each
    client z-scored with its own training statistics."""
    data = load_windows(name, data_dir, verbose=verbose)
    fed = partition_by_subject(data, seed, test_fraction, False, split)
    if classes_per_client is not None:
        fed = keep_classes_per_client(fed, classes_per_client, seed)
    if label_noise is not None:
        fed, affected = inject_label_noise(fed, *label_noise, seed)
        fed = dataclasses.replace(fed, noisy_clients=tuple(affected))
    return standardize_all(fed) if standardize else fed


def har_recipe(config: object) -> dict:
    """The data recipe of a HAR method's configuration (its ``dataset``, ``seed``,
    ``standardize``, ``split``, ``label_noise``, ``classes_per_client``, ``dataset_sha256``):
    what the run loads
    through :func:`load_recorded` and records as its deploy manifest's ``data``, so training
    and export read the same clients. Scenarios appear only when set."""
    recipe = {
        "loader": "har",
        "dataset": config.dataset,
        "seed": config.seed,
        "standardize": config.standardize,
        "split": config.split,
    }
    if config.label_noise is not None:
        recipe["label_noise"] = list(config.label_noise)
    if config.classes_per_client is not None:
        recipe["classes_per_client"] = config.classes_per_client
    if config.dataset_sha256 is not None:
        recipe["sha256"] = config.dataset_sha256
    return recipe


def _user_file_recipe(loader: str, config: object) -> dict:
    """The recipe of your own data file: the ``loader``, the path and, when known, its
    SHA-256 (:func:`load_recorded` refuses a file that changed since the run)."""
    recipe = {"loader": loader, "dataset": config.dataset}
    if config.dataset_sha256 is not None:
        recipe["sha256"] = config.dataset_sha256
    return recipe


def tabular_recipe(config: object) -> dict:
    """The data recipe of a clustering run (Fed-HIRE, k-FED, federated k-means): a UCI table
    with its split, or your own ``.npz`` table (with its SHA-256 when known), loaded again by
    :func:`table_clients`. A table handed to the run in Python is recorded by the
    configuration's names alone; :meth:`fedprune.runs.assigner.Assigner.same_objects` tells
    whether what they load is what the run clustered."""
    if is_user_file(config.dataset):
        return _user_file_recipe("table", config)
    return {
        "loader": "uci-tabular",
        "dataset": config.dataset,
        "partition": config.partition,
        "num_clients": config.num_clients,
        "seed": config.seed,
    }


def table_clients(recipe: dict, data_dir: str | os.PathLike | None = None) -> list[np.ndarray]:
    """Each client's objects of a clustering run as the table holds them (before the run's
    encoding), in the order of its ``labels.npz`` (``rows<l>``), loaded again from the
    :func:`tabular_recipe` the run recorded."""
    from fedprune.data.table_partition import FederatedSplit, make_split

    kind = recipe.get("loader")
    if kind == "table":
        mine = load_recorded(recipe, data_dir)
        return [np.asarray(x) for x in FederatedSplit.from_clients(mine.client_x()).client_x()]
    if kind == "uci-tabular":
        from fedprune.data.uci_tabular import load_tabular

        table = load_tabular(recipe["dataset"], data_dir)
        split = make_split(
            recipe["dataset"],
            table.x,
            table.y,
            recipe["partition"],
            int(recipe["num_clients"]),
            int(recipe["seed"]),
        )
        return [split.raw[r] for r in split.rows]
    raise DataError(
        f"unknown data recipe {kind!r} for a clustering run; re-run it with this version"
    )


# the partition options of AS-CFL's and its baselines' configurations, as the recipe records them
ROTATED_FIELDS = (
    "num_clients",
    "labels",
    "alpha",
    "seed",
    "min_frac",
    "max_frac",
    "proxy_size",
    "proxy_rotation",
)


def rotated_images_recipe(config: object) -> dict:
    """The data recipe of a clustered image run (AS-CFL, CFL, CFL with a fixed K, IFCA): the
    built-in dataset and the options of its rotated, label-skewed partition, or your own
    images file with its SHA-256 (its clients and proxy set come with it). What the run
    trains on (:func:`rotated_federation`) and records as its deploy manifest's ``data``."""
    if is_user_file(config.dataset):
        return _user_file_recipe("rotated-images", config)
    return {
        "loader": "rotated-images",
        "dataset": config.dataset,
        **{k: getattr(config, k) for k in ROTATED_FIELDS},
    }


def rotated_federation(
    recipe: dict, data_dir: str | os.PathLike | None = None
) -> RotatedFederatedData:
    """The clients and proxy set of a :func:`rotated_images_recipe`: the rotated partition
    (:func:`fedprune.data.rotated_partition.partition_rotated`) of the dataset's official
    splits, or your images file (:func:`fedprune.data.user_images.to_federation`)."""
    user = is_user_file(str(recipe.get("dataset", "")))
    missing = [k for k in ("dataset", *(() if user else ROTATED_FIELDS)) if k not in recipe]
    if missing:
        raise DataError(
            f"the data recipe of the clustered image run lacks {', '.join(missing)}; its "
            "summary.json is damaged"
        )
    if user:
        return to_federation(read_images_npz(recipe["dataset"]))
    train = load_images(recipe["dataset"], "train", data_dir)
    test = load_images(recipe["dataset"], "test", data_dir)
    return partition_rotated(
        train,
        test,
        num_clients=recipe["num_clients"],
        alpha=recipe["alpha"],
        seed=recipe["seed"],
        min_frac=recipe["min_frac"],
        max_frac=recipe["max_frac"],
        proxy_size=recipe["proxy_size"],
        proxy_rotation=recipe["proxy_rotation"],
        iid_labels=recipe["labels"] == "iid",
    )


def load_recorded(
    recipe: dict, data_dir: str | os.PathLike | None = None
) -> FederatedData | list[ClientImages] | ClientTable:
    """The clients' data a run recorded how to load (its deploy manifest's ``data``):
    ``har`` -> :func:`load_federated`; ``image-clients`` -> the FedCRef clients
    (:func:`fedprune.data.clustered_partition.partition_clients`); ``table`` -> your own
    table (:func:`fedprune.data.tables.read_table_npz`); ``rotated-images`` -> the clients
    of a clustered image run (:func:`rotated_federation`; its proxy set left out)."""
    kind = recipe.get("loader")
    if kind in ("har", "table", "rotated-images") and "sha256" in recipe:
        # a file of yours; this runs for commands on a finished run (export, fine-tuning,
        # reopening), which have no --dataset option: the message names the file itself
        from fedprune.runs.names import USER_DATASET

        path = Path(recipe["dataset"])
        if not path.is_file():
            own = path.name == USER_DATASET
            raise DataError(
                f"the data file the run was trained on, {path}, is missing; "
                + (
                    "the run folder keeps its own copy of your data: move or copy the folder "
                    "whole, or train again"
                    if own
                    else "restore it"
                )
            )
        if file_sha256(path) != recipe["sha256"]:
            raise DataError(
                f"the data file {path} has changed since the run was trained (its SHA-256 "
                "differs); restore the file the run was trained on"
            )
    if kind == "har":
        return load_federated(
            recipe["dataset"],
            recipe["seed"],
            data_dir,
            recipe.get("standardize", False),
            split=recipe.get("split", "random"),  # recipes before --split: the random split
            label_noise=tuple(recipe["label_noise"]) if "label_noise" in recipe else None,
            classes_per_client=recipe.get("classes_per_client"),
        )
    if kind == "image-clients":
        images = load_images(recipe["dataset"], recipe.get("split", "train"), data_dir)
        return partition_clients(
            images,
            recipe["num_clients"],
            recipe["samples_per_class"],
            recipe.get("overlap", 0.0),
            recipe["seed"],
            max_classes=recipe.get("max_classes"),
        )
    if kind == "table":  # your own vectors (FedCRef): one client per id, in ascending order
        return read_table_npz(recipe["dataset"])
    if kind == "rotated-images":
        return rotated_federation(recipe, data_dir).federated
    raise DataError(f"unknown data recipe {kind!r}; re-run training with this version")
