"""FedCRef end to end on a tiny MNIST-format fixture: files, resume, edge export; and the
Done-when check on real MNIST (slow, real data)."""

from __future__ import annotations

import csv
import dataclasses
import json

import numpy as np
import pytest

from fedprune.algorithms.fedcref.experiment import run_fedcref_experiment as run_experiment
from fedprune.configs.fedcref import FedCRefConfig, FedCRefRunConfig, SystemConfig
from fedprune.data import images
from fedprune.errors import ConfigError
from tests.conftest import interrupted
from tests.data.test_images import write_idx_pair

pytestmark = pytest.mark.slow


def pattern_images(per_class: int = 40, classes: int = 6, seed: int = 0):
    """Each class lights a different horizontal band of the image, plus noise."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(classes), per_class).astype(np.uint8)
    x = rng.integers(0, 40, size=(len(y), 28, 28)).astype(np.uint8)
    for i, c in enumerate(y):
        x[i, 4 * c : 4 * c + 4, :] = 220
    return x, y


@pytest.fixture
def mnist_dir(tmp_path):
    x, y = pattern_images()
    write_idx_pair(tmp_path / "mnist", images.file_names("mnist", "train"), x, y)
    return tmp_path


SYSTEM = SystemConfig("mnist", num_clients=4, samples_per_class=10, dirtiness=0.2)
CONFIG = FedCRefConfig(local_epochs=3, fl_rounds=2, max_iterations=2, batch_size=8, theta=0.3)


def run_fedcref_experiment(system, config, out, data_dir, progress=False):
    """The registry's FedCRef runner on the two halves of its configuration."""
    run_config = FedCRefRunConfig(**dataclasses.asdict(system), **dataclasses.asdict(config))
    return run_experiment(run_config, out, data_dir, progress)


def test_run_writes_files_and_resumes_identically(tmp_path, mnist_dir, tff_context, monkeypatch):
    summary = run_fedcref_experiment(SYSTEM, CONFIG, tmp_path / "a", mnist_dir, progress=False)
    assert (summary["method"], summary["dataset"], summary["seed"]) == ("fedcref", "mnist", 0)
    assert (summary["num_clients"], summary["dirtiness"]) == (4, 0.2)
    assert summary["true_categories"] <= 6 and 1 <= summary["iterations"] <= 2
    with open(tmp_path / "a" / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["iteration"]) for r in rows] == list(range(1, 1 + summary["iterations"]))
    first, last = rows[0], rows[-1]
    assert summary["acc_final"] == float(last["acc"])
    assert summary["wrong_assoc_pct"] == float(last["wrong_assoc_pct"])
    assert (summary["communities"], summary["isolated_end"]) == (
        int(last["communities"]),
        int(last["isolated"]),
    )
    assert (summary["clusters_total"], summary["isolated_start"]) == (
        int(first["clusters"]),
        int(first["isolated"]),
    )
    assert summary["wall_s"] == float(last["wall_s"]) > 0
    models = np.load(tmp_path / "a" / "community_models.npz")
    assert len({name.split("_")[0] for name in models.files}) == summary["communities"]
    assert (tmp_path / "a" / "community_models.npz").exists()
    assert not (tmp_path / "a" / "checkpoint.npz").exists()

    assert summary["iterations"] == 2  # so that an interruption after iteration 1 is resumable

    def numbers(result: dict) -> dict:
        return {k: v for k, v in result.items() if k != "wall_s"}

    # after iteration 1, and after the last one (its checkpoint holds the stop decision)
    for after, out in ((1, "b"), (2, "c")):

        def run(out=out):
            return run_fedcref_experiment(SYSTEM, CONFIG, tmp_path / out, mnist_dir, progress=False)

        interrupted(monkeypatch, run, after_round=after)
        assert numbers(run()) == numbers(summary)
        a = np.load(tmp_path / "a" / "assignments.npz")
        b = np.load(tmp_path / out / "assignments.npz")
        for k in a.files:
            np.testing.assert_array_equal(a[k], b[k])


def _rewrite_checkpoint(path, change) -> None:
    with np.load(path) as z:
        flat = {key: z[key] for key in z.files}
    change(flat)
    np.savez(path, **flat)


def test_a_checkpoint_of_another_autoencoder_or_cluster_is_refused(
    tmp_path, mnist_dir, tff_context, monkeypatch
):
    """Resumed from iteration 1: the checkpoint's autoencoder weights must have this run's
    shapes, and every sample's local cluster must be one of its client's clusters."""
    import shutil

    from fedprune.errors import DataError

    out = tmp_path / "run"

    def run():
        return run_fedcref_experiment(SYSTEM, CONFIG, out, mnist_dir, progress=False)

    interrupted(monkeypatch, run, after_round=1)
    checkpoint = out / "checkpoint.npz"
    saved = tmp_path / "saved.npz"
    shutil.copy(checkpoint, saved)

    _rewrite_checkpoint(checkpoint, lambda f: f.update(model_weights__0=np.zeros((3, 2))))
    with pytest.raises(DataError, match=r"does not fit this run \('model_weights' array 0 has "):
        run()
    shutil.copy(saved, checkpoint)

    def cluster_9(flat: dict) -> None:
        flat["assignments__1"] = flat["assignments__1"].copy()
        flat["assignments__1"][3] = 9

    _rewrite_checkpoint(checkpoint, cluster_9)
    with pytest.raises(DataError, match=r"is damaged \('assignments' array 1 names cluster 9; "):
        run()


def test_community_autoencoders_export(tmp_path, mnist_dir, tff_context):
    from edge_export.autoencoders import export_fedcref_run

    run = tmp_path / "run"
    # theta = 1 associates every pair: the tiny system then surely has a community to export
    config = dataclasses.replace(CONFIG, theta=1.0)
    summary = run_fedcref_experiment(SYSTEM, config, run, mnist_dir, progress=False)
    assert summary["communities"] >= 1
    entries = export_fedcref_run(run, ["float32", "int8"], tmp_path / "exp", mnist_dir, micro=True)
    by_format = {e["format"]: e for e in entries if e["community"] == 0}
    assert by_format["float32"]["max_abs_mse_diff"] < 1e-4
    assert by_format["int8"]["bytes"] < by_format["float32"]["bytes"] / 3
    assert by_format["int8"]["assignment_agreement"] >= 0.9
    assert by_format["int8"]["micro_arena_bytes"] > 0
    assert (tmp_path / "exp" / "community0" / "int8_micro.cc").exists()
    report = json.loads((tmp_path / "exp" / "export_report.json").read_text())
    assert len(report) == 2 * summary["communities"]
    with pytest.raises(ConfigError, match="not offered for autoencoders"):
        export_fedcref_run(run, ["int8-sparse"], tmp_path / "x", mnist_dir)


def test_impossible_system_is_refused(tmp_path, mnist_dir):
    with pytest.raises(ConfigError, match="samples"):
        run_fedcref_experiment(
            SystemConfig("mnist", num_clients=4, samples_per_class=400),
            CONFIG,
            tmp_path / "r",
            mnist_dir,
            progress=False,
        )
    with pytest.raises(ConfigError, match="K_G - 1 = 5"):
        run_fedcref_experiment(
            SystemConfig("mnist", num_clients=4, samples_per_class=5, max_classes=6),
            CONFIG,
            tmp_path / "k",
            mnist_dir,
            progress=False,
        )
    assert not (tmp_path / "k" / "config.json").exists()  # the corrected command may use it
    with pytest.raises(ConfigError, match="dirtiness"):
        SystemConfig(dirtiness=1.5)
