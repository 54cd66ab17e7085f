"""fedprune.runs.deploy: the manifest's JSON round trip, the manifests derived for runs written
before manifests existed (one per method layout), and one-line refusals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fedprune.data import uci_har, wisdm
from fedprune.errors import DataError
from fedprune.runs import names
from fedprune.runs.deploy import (
    LEGACY_HAR_DATASETS,
    DeployManifest,
    har_manifest,
    legacy_manifest,
)

HAR = {"loader": "har", "dataset": "uci_har", "seed": 3, "standardize": True}
FEDCREF = {
    "method": "fedcref", "dataset": "fashion_mnist", "split": "train", "num_clients": 4,
    "samples_per_class": 10, "overlap": 0.3, "seed": 2, "init": "dirty", "dirtiness": 0.2,
    "theta": 0.15,
}  # fmt: skip


def _manifests() -> list[DeployManifest]:
    return [
        har_manifest("global", HAR, (128, 9), uci_har.CLASS_NAMES),
        har_manifest(
            "personal", HAR, (128, 9), uci_har.CLASS_NAMES, (3, 25), pruned=True, clustered=True
        ),
        legacy_manifest(Path("run"), FEDCREF),
    ]


@pytest.mark.parametrize("manifest", _manifests(), ids=["global", "personal", "community"])
def test_json_round_trip(manifest):
    text = json.dumps(manifest.to_json())  # what summary.json holds
    assert DeployManifest.from_json(json.loads(text), Path(names.SUMMARY)) == manifest


def test_har_manifest_fields():
    personal = har_manifest("personal", HAR, (128, 9), uci_har.CLASS_NAMES, (3, 25), True, True)
    assert personal.models == {"3": "personal_ft3.npz", "25": "personal_ft25.npz"}
    assert (personal.masks, personal.clusters) == (names.MASKS, names.CLUSTERS)
    assert "z-score" in personal.normalization
    plain = har_manifest("global", {**HAR, "standardize": False}, (128, 9), uci_har.CLASS_NAMES)
    assert plain.models == names.CHECKPOINT and plain.masks is None
    assert plain.normalization.startswith("none")


def test_personal_file_picks_the_longest_or_the_asked_length():
    manifest = har_manifest("personal", HAR, (128, 9), uci_har.CLASS_NAMES, (25, 3))
    assert manifest.personal_file(None) == (25, "personal_ft25.npz")
    assert manifest.personal_file(3) == (3, "personal_ft3.npz")
    assert manifest.personal_file(7) == (7, "personal_ft7.npz")  # the reader says it is missing
    empty = har_manifest("personal", HAR, (128, 9), uci_har.CLASS_NAMES, ())
    assert empty.personal_file(None) == (None, None)


# --- runs written before manifests: derived from config.json -----------------------------------


def test_legacy_fedavg_deploys_the_global_model(tmp_path):
    config = {"method": "fedavg", "dataset": "wisdm", "seed": 1, "rounds": 2}
    manifest = legacy_manifest(tmp_path, config)
    assert manifest.kind == "global" and manifest.models == names.CHECKPOINT
    assert manifest.model == "har_cnn" and manifest.labels == wisdm.CLASS_NAMES
    assert manifest.input_shape == (wisdm.WINDOW, len(wisdm.CHANNELS))
    assert manifest.data == {
        "loader": "har",
        "dataset": "wisdm",
        "seed": 1,
        "standardize": False,
        "split": "random",  # runs before --split used the random split
    }
    assert manifest.masks is None


@pytest.mark.parametrize("method", ["caafp", "fedsnip", "efficientfl", "fedchar", "clusterfl"])
def test_legacy_personal_methods(tmp_path, method):
    config = {"method": method, "dataset": "uci_har", "seed": 0, "ft_epochs": [1, 3]}
    dense = legacy_manifest(tmp_path, config)
    assert dense.kind == "personal" and dense.models == {
        "1": "personal_ft1.npz",
        "3": "personal_ft3.npz",
    }
    assert dense.input_shape == (128, 9) and dense.labels == uci_har.CLASS_NAMES
    assert dense.masks is None  # no masks.npz: a dense run (ClusterFL, FedCHAR)
    np.savez(tmp_path / names.MASKS, cluster0_0=np.ones(2, np.uint8))
    assert legacy_manifest(tmp_path, config).masks == names.MASKS


def test_legacy_fedcref_records_its_clients_recipe(tmp_path):
    manifest = legacy_manifest(tmp_path, FEDCREF)
    assert manifest.kind == "community" and manifest.models == names.COMMUNITY_MODELS
    assert manifest.model == "autoencoder" and manifest.labels is None
    assert manifest.data == {
        "loader": "image-clients", "dataset": "fashion_mnist", "split": "train",
        "num_clients": 4, "samples_per_class": 10, "overlap": 0.3, "seed": 2, "max_classes": None,
    }  # fmt: skip
    with_bound = legacy_manifest(tmp_path, {**FEDCREF, "max_classes": 3})
    assert with_bound.data["max_classes"] == 3


# --- refusals: one line naming the file ---------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"method": "fedprox", "dataset": "uci_har", "seed": 0}, "method 'fedprox' cannot be"),
        ({"dataset": "uci_har", "seed": 0}, "method None cannot be exported"),
        ({"method": "fedavg", "seed": 0}, "config.json is damaged (no dataset)"),
        ({"method": "fedavg", "dataset": "wisdm"}, "config.json is damaged (no seed)"),
        ({"method": "caafp", "dataset": "uci_har", "seed": 0, "ft_epochs": 3}, "ft_epochs"),
        ({"method": "caafp", "dataset": "uci_har", "seed": 0, "ft_epochs": ["x"]}, "ft_epochs"),
    ],
)
def test_legacy_refusals_are_one_line(tmp_path, config, words):
    with pytest.raises(DataError) as err:
        legacy_manifest(tmp_path, config)
    message = str(err.value)
    assert words in message and str(tmp_path) in message and "\n" not in message


def test_the_legacy_datasets_are_the_built_in_ones():
    assert LEGACY_HAR_DATASETS == {
        "uci_har": ((uci_har.WINDOW, len(uci_har.SIGNALS)), uci_har.CLASS_NAMES),
        "wisdm": ((wisdm.WINDOW, len(wisdm.CHANNELS)), wisdm.CLASS_NAMES),
    }


def test_legacy_unknown_dataset_is_one_line(tmp_path):
    with pytest.raises(DataError) as err:
        legacy_manifest(tmp_path, {"method": "fedavg", "dataset": "mnist", "seed": 0})
    assert str(err.value).startswith(f"{tmp_path / names.CONFIG}: unknown dataset 'mnist'")


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda m: m.pop("kind"), "incomplete"),
        (lambda m: m.update(kind="federated"), "unknown deploy kind 'federated'"),
        (lambda m: m.update(models="personal_ft3.npz"), "not a map of epochs to files"),
        (lambda m: m.update(models={"x": "personal_ft3.npz"}), "is damaged (deploy manifest"),
        (lambda m: m.update(input_shape=["a", 9]), "is damaged (deploy manifest"),
        (lambda m: m.update(data="uci_har"), "data is not a recipe"),
    ],
)
def test_damaged_manifests_are_one_line(tmp_path, change, words):
    value = har_manifest("personal", HAR, (128, 9), uci_har.CLASS_NAMES, (3,)).to_json()
    change(value)
    with pytest.raises(DataError) as err:
        DeployManifest.from_json(value, tmp_path / names.SUMMARY)
    message = str(err.value)
    assert words in message and str(tmp_path / names.SUMMARY) in message
    assert "\n" not in message


def test_a_global_manifest_needs_a_file_name(tmp_path):
    value = har_manifest("global", HAR, (128, 9), uci_har.CLASS_NAMES).to_json()
    value["models"] = {"3": "personal_ft3.npz"}
    with pytest.raises(DataError, match="models is not a file name"):
        DeployManifest.from_json(value, tmp_path / names.SUMMARY)
