"""Clustered image runs (AS-CFL, CFL, CFL with a fixed K, IFCA) keep each cluster's final
model and export per client: each client deploys its cluster's model.

The fast tests read hand-written run directories (the manifest's round trip, the recipe, the
errors of runs with nothing to export); the slow ones train a tiny AS-CFL and a tiny IFCA run
on fixture images (the official idx format) and export every client with ``edge-export``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edge_export.cli import main
from fedprune.configs.ascfl import ClusteredImageConfig, IFCAConfig
from fedprune.data import images
from fedprune.data.partition import FederatedData
from fedprune.data.registry import load_recorded, rotated_images_recipe
from fedprune.errors import DataError
from fedprune.runs import artefacts, names
from fedprune.runs.deploy import DeployManifest, image_manifest, legacy_manifest
from tests.algorithms.test_fedcref_run import pattern_images
from tests.conftest import interrupted
from tests.data.test_images import write_idx_pair

# two rounds of 4 clients, the warm-up off (as tests/algorithms/ascfl/test_run.py)
TINY = dict(num_clients=4, proxy_size=20, rounds=2, batch_size=16, min_frac=0.5, max_frac=1.0)
TINY["warmup_rounds"] = 0
CONFIGS = {"ascfl": ClusteredImageConfig(**TINY), "ifca": IFCAConfig(**TINY, clusters=2)}
CLUSTERED = ("ascfl", "cfl", "cfl-fixed", "ifca")


def _write_images(root: Path) -> Path:
    for split, seed in (("train", 0), ("test", 1)):
        x, y = pattern_images(per_class=30, classes=6, seed=seed)
        write_idx_pair(root / "mnist", images.file_names("mnist", split), x, y)
    return root


def _single_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("edge-export: error: "), err
    return lines[0]


# --- the manifest and its recipe (no training) ---------------------------------------------------


def test_the_manifest_round_trips_and_records_the_partition():
    config = ClusteredImageConfig(**TINY, seed=3, labels="iid")
    recipe = rotated_images_recipe(config)
    assert recipe == {
        "loader": "rotated-images", "dataset": "mnist", "num_clients": 4, "labels": "iid",
        "alpha": 0.4, "seed": 3, "min_frac": 0.5, "max_frac": 1.0, "proxy_size": 20,
        "proxy_rotation": "mixed",
    }  # fmt: skip
    manifest = image_manifest(recipe, (28, 28, 1), tuple("0123456789"), "image_cnn_small")
    assert manifest.kind == "clustered" and manifest.models == names.CLUSTER_MODELS
    assert manifest.clusters == names.CLUSTERS and manifest.masks is None
    assert "[0, 1]" in manifest.normalization
    text = json.dumps(manifest.to_json())  # what summary.json holds
    assert DeployManifest.from_json(json.loads(text), Path(names.SUMMARY)) == manifest


def test_your_images_file_is_recorded_by_path_and_digest(tmp_path):
    path = str(tmp_path / "mine.npz")
    config = IFCAConfig(dataset=path, num_clients=3, clusters=2, dataset_sha256="ab" * 32)
    recipe = rotated_images_recipe(config)
    assert recipe == {"loader": "rotated-images", "dataset": path, "sha256": "ab" * 32}
    manifest = image_manifest(recipe, (8, 8, 1), ("a", "b"), "user:tiny")
    assert manifest.normalization.startswith("none") and manifest.model == "user:tiny"
    (tmp_path / "mine.npz").write_bytes(b"other bytes")
    with pytest.raises(DataError, match="has changed since the run was trained"):
        load_recorded(recipe)


def test_a_clustered_manifest_must_name_its_clusters(tmp_path):
    value = image_manifest(
        rotated_images_recipe(CONFIGS["ifca"]), (28, 28, 1), ("0", "1"), "image_cnn_small"
    ).to_json()
    value["clusters"] = None
    with pytest.raises(DataError, match="names no clusters file") as err:
        DeployManifest.from_json(value, tmp_path / names.SUMMARY)
    assert str(tmp_path / names.SUMMARY) in str(err.value)


# --- runs with nothing to export: say what they hold and what to do ------------------------------


def _old_clustered_run(run: Path, method: str) -> None:
    """A finished run of an earlier version: no cluster models, no deploy manifest."""
    run.mkdir()
    config = {"method": method, "dataset": "mnist", "seed": 0, "num_clients": 4}
    (run / names.CONFIG).write_text(json.dumps(config))
    (run / names.METRICS).write_text("round,acc\n1,0.5\n")
    (run / names.CLUSTERS).write_text(json.dumps({"0": 0, "1": 1, "2": 0, "3": 1}))
    (run / names.SUMMARY).write_text(json.dumps({"method": method, "final_acc": 0.5}))


@pytest.mark.parametrize("method", CLUSTERED)
def test_an_earlier_clustered_run_says_it_kept_no_models(method, tmp_path, capsys):
    _old_clustered_run(tmp_path / "run", method)
    out = tmp_path / "export"
    assert main([str(tmp_path / "run"), "--out", str(out), "--no-progress"]) == 2
    line = _single_error_line(capsys.readouterr().err)
    assert f"this {method} run holds no model weights" in line
    assert "clusters.json" in line and names.CLUSTER_MODELS in line
    assert "train it again with this version into a new --out" in line
    assert "unknown dataset" not in line and not out.exists()
    with pytest.raises(DataError, match="holds no model weights"):
        legacy_manifest(tmp_path / "run", json.loads((tmp_path / "run" / names.CONFIG).read_text()))


def test_a_missing_cluster_models_file_is_named(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    config = {**CONFIGS["ifca"].recorded(), "method": "ifca"}
    (run / names.CONFIG).write_text(json.dumps(config))
    manifest = image_manifest(
        rotated_images_recipe(CONFIGS["ifca"]), (28, 28, 1), tuple("012345"), "image_cnn_small"
    )
    (run / names.SUMMARY).write_text(json.dumps({"deploy": manifest.to_json()}))
    artefacts.write_clusters(run, {0: 0, 1: 1, 2: 0, 3: 1})
    assert main([str(run), "--out", str(tmp_path / "export"), "--no-progress"]) == 2
    line = _single_error_line(capsys.readouterr().err)
    assert f"{run / names.CLUSTER_MODELS} is missing" in line and "new --out" in line

    # a cluster without a model: the file is damaged
    artefacts.write_cluster_models(run, {0: [np.zeros(2, np.float32)]})
    assert main([str(run), "--out", str(tmp_path / "export"), "--no-progress"]) == 2
    line = _single_error_line(capsys.readouterr().err)
    assert "is damaged (no model of cluster(s) [1])" in line


# --- tiny runs, exported per client -------------------------------------------------------------


@pytest.fixture(scope="module")
def image_dir(tmp_path_factory):
    return _write_images(tmp_path_factory.mktemp("images"))


@pytest.fixture(scope="module")
def trained(image_dir, tmp_path_factory, tff_context):
    """One tiny run per method, trained once: {method: run directory}."""
    from fedprune.algorithms.ascfl.experiment import run_clustered_images

    root = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FEDPRUNE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        for method, config in CONFIGS.items():
            run_clustered_images(config, root / method, image_dir, progress=False)
    return {method: root / method for method in CONFIGS}


def _keras(manifest: DeployManifest, weights: list[np.ndarray]):
    from fedprune.models.spec import ModelSpec

    model = ModelSpec(manifest.input_shape, len(manifest.labels), 0, manifest.model).keras()
    model.set_weights(weights)
    return model


@pytest.mark.slow
@pytest.mark.parametrize("method", list(CONFIGS))
def test_each_client_exports_its_clusters_model(method, trained, image_dir, tmp_path, capsys):
    from edge_export.verify import run_tflite

    run = trained[method]
    out = tmp_path / "export"
    args = [str(run), "--clients", "all", "--formats", "float32,int8", "--out", str(out)]
    assert main([*args, "--data-dir", str(image_dir), "--no-progress"]) == 0
    capsys.readouterr()

    summary = json.loads((run / names.SUMMARY).read_text())
    manifest = DeployManifest.from_json(summary["deploy"], run / names.SUMMARY)
    assert manifest.kind == "clustered" and manifest.model == "image_cnn_small"
    clusters = artefacts.read_clusters(run)
    models = artefacts.read_cluster_models(run)
    assert sorted(clusters) == [0, 1, 2, 3] and set(clusters.values()) <= set(models)
    data = load_recorded(manifest.data, image_dir)
    assert isinstance(data, FederatedData) and data.class_names == manifest.labels

    # every client in both formats; float32 agrees with Keras on every test image
    report = json.loads((out / "export_report.json").read_text())
    assert sorted((e["client"], e["format"]) for e in report) == sorted(
        (c, f) for c in range(4) for f in ("float32", "int8")
    )
    for entry in report:
        if entry["format"] == "float32":
            assert entry["agreement"] == 1.0 and entry["flipped_windows"] == 0
            assert entry["max_prob_diff"] < 1e-5
        assert entry["test_windows"] == len(data.client(entry["client"]).y_test)
        meta = json.loads((out / entry["path"]).with_suffix(".json").read_text())
        assert meta["method"] == method and meta["labels"] == list(manifest.labels)
        assert meta["models"].startswith(names.CLUSTER_MODELS)

    # each client's file is its cluster's model: the same outputs as that model in Keras on
    # every client's test images, other outputs than another cluster's model
    x = np.concatenate([c.x_test for c in data.clients])
    keras = {k: _keras(manifest, w).predict(x, verbose=0) for k, w in models.items()}
    files = {c: (out / f"client{c}" / "float32.tflite").read_bytes() for c in clusters}
    for client, cluster in clusters.items():
        probs, _ = run_tflite(files[client], x)
        assert np.max(np.abs(probs - keras[cluster])) < 1e-5
        for other in set(clusters.values()) - {cluster}:
            assert np.max(np.abs(probs - keras[other])) > 1e-3
    pairs = [(a, b) for a in clusters for b in clusters if a < b]
    same = [(a, b) for a, b in pairs if clusters[a] == clusters[b]]
    apart = [(a, b) for a, b in pairs if clusters[a] != clusters[b]]
    assert same and apart  # the tiny runs have both
    assert all(files[a] == files[b] for a, b in same)  # identical weights, identical files
    assert all(files[a] != files[b] for a, b in apart)


@pytest.mark.slow
def test_resumed_and_repeated_runs_keep_the_same_models(
    trained, image_dir, tmp_path, monkeypatch, tff_context
):
    from fedprune.algorithms.ascfl.experiment import run_clustered_images

    config = CONFIGS["ascfl"]
    out = tmp_path / "resumed"
    interrupted(
        monkeypatch,
        lambda: run_clustered_images(config, out, image_dir, progress=False),
        after_round=1,
    )
    assert not (out / names.CLUSTER_MODELS).exists()  # written when the run finishes
    resumed = run_clustered_images(config, out, image_dir, progress=False)
    straight = json.loads((trained["ascfl"] / names.SUMMARY).read_text())
    assert resumed["deploy"] == straight["deploy"]
    assert artefacts.read_clusters(out) == artefacts.read_clusters(trained["ascfl"])
    a, b = artefacts.read_cluster_models(out), artefacts.read_cluster_models(trained["ascfl"])
    assert sorted(a) == sorted(b)
    for k in a:
        assert all(np.array_equal(x, y) for x, y in zip(a[k], b[k], strict=True))
    assert not (out / names.CHECKPOINT).exists()
    # a finished run answers at once with the summary it wrote
    assert run_clustered_images(config, out, image_dir, progress=False) == resumed


@pytest.mark.slow
def test_a_run_on_your_images_exports_from_the_recorded_file(tmp_path, capsys, tff_context):
    from fedprune.algorithms.ascfl.experiment import run_clustered_images
    from fedprune.data.user_images import from_images, write_images_npz

    rng = np.random.default_rng(0)
    y = np.tile(np.arange(3), 32)
    x = (0.2 * rng.random((len(y), 12, 12, 1))).astype(np.float32)
    for i, c in enumerate(y):
        x[i, 4 * c : 4 * c + 4] += 0.8  # each class lights its own band
    mine = from_images(
        x, y, np.repeat(np.arange(4), 24), proxy=(x[:12], y[:12]), class_names=["a", "b", "c"]
    )
    path = write_images_npz(mine, tmp_path / "mine.npz")
    config = IFCAConfig(dataset=str(path), num_clients=4, clusters=2, rounds=2, batch_size=8)
    summary = run_clustered_images(config, tmp_path / "run", progress=False)
    assert summary["deploy"]["data"]["dataset"] == str(path)
    assert summary["deploy"]["labels"] == ["a", "b", "c"]
    out = tmp_path / "export"
    args = [str(tmp_path / "run"), "--clients", "1", "--formats", "float32", "--out", str(out)]
    assert main([*args, "--no-progress"]) == 0
    capsys.readouterr()
    (entry,) = json.loads((out / "export_report.json").read_text())
    assert entry["agreement"] == 1.0 and entry["test_windows"] == 6  # 2 of 8 per class
    meta = json.loads((out / "client1" / "float32.json").read_text())
    assert meta["labels"] == ["a", "b", "c"] and meta["input"]["shape"] == [1, 12, 12, 1]


@pytest.mark.slow
@pytest.mark.parametrize("method", list(CONFIGS))
def test_the_python_api_gives_each_client_its_clusters_model(method, trained):
    from fedprune.api.result import open_result
    from fedprune.runs import artefacts

    result = open_result(trained[method])
    weights = result.weights()
    clusters = artefacts.read_clusters(trained[method])
    models = artefacts.read_cluster_models(trained[method])
    assert sorted(weights) == sorted(clusters)
    for client, cluster in clusters.items():
        for got, want in zip(weights[client], models[cluster], strict=True):
            np.testing.assert_array_equal(got, want)
    built = result.models()
    assert sorted(built) == sorted(clusters)
