"""Your own windows as ``--dataset PATH.npz``: the HAR methods train on them as on a built-in
dataset, the run records the file's SHA-256, and a changed file is not resumed or exported."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedprune.cli import main
from fedprune.data.registry import load_recorded
from fedprune.data.user import file_sha256
from fedprune.errors import DataError

pytestmark = pytest.mark.slow


def _write(path, seed: int = 0) -> None:
    """Six clients of 40 windows 16 x 3, four classes that shift one channel each."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(240, 16, 3)).astype(np.float32)
    y = rng.integers(0, 4, 240)
    x[np.arange(240), :, y % 3] += 2.0
    names = np.array(["sit", "stand", "walk", "run"])
    np.savez(path, x=x, y=y, client_id=np.repeat(np.arange(6), 40), class_names=names)


def test_own_npz_trains_records_its_hash_and_refuses_a_changed_file(tmp_path, capsys):
    data = tmp_path / "mine.npz"
    _write(data)
    run = tmp_path / "run"
    argv = ["train", "caafp", "--dataset", str(data), "--phases", "1,0,2", "--clusters", "2"]
    argv += ["--clients-per-round", "4", "--prune-frequency", "1", "--ft-epochs", "1"]
    argv += ["--no-progress", "--out", str(run)]
    assert main(argv) == 0
    config = json.loads((run / "config.json").read_text())
    summary = json.loads((run / "summary.json").read_text())
    assert config["dataset_sha256"] == file_sha256(data)
    assert summary["num_clients"] == 6 and summary["deploy"]["labels"] == [
        "sit",
        "stand",
        "walk",
        "run",
    ]
    recipe = summary["deploy"]["data"]
    assert recipe["sha256"] == file_sha256(data)
    fed = load_recorded(recipe)  # what edge-export reads: the same clients
    assert fed.input_shape == (16, 3) and fed.num_clients == 6

    _write(data, seed=1)  # other bytes at the same path
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "is not the file this run was trained on (its SHA-256 differs)" in err
    with pytest.raises(DataError, match="has changed since the run was trained"):
        load_recorded(recipe)
