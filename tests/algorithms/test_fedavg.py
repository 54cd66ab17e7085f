import json
import subprocess
import sys

import numpy as np
import pytest

from fedprune.algorithms.fedavg import run_fedavg
from fedprune.configs.fedavg import FedAvgConfig
from fedprune.runs import METRICS
from fedprune.runs.run_dir import read_metrics
from tests.conftest import interrupted

pytestmark = pytest.mark.slow


def test_cli_run_writes_files_and_resumes_finished(tmp_path, fixture_data_dir):
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "fedprune.cli",
        "train",
        "fedavg",
        "--dataset",
        "wisdm",
        "--rounds",
        "2",
        "--clients-per-round",
        "2",
        "--local-epochs",
        "1",
        "--data-dir",
        str(fixture_data_dir),
        "--out",
        str(out),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["method"], summary["dataset"], summary["seed"]) == ("fedavg", "wisdm", 0)
    assert summary["params"] == 124_198 and summary["num_clients"] == 3
    client_acc = list(summary["client_acc"].values())
    assert len(client_acc) == 3
    assert summary["avg_acc"] == pytest.approx(np.mean(client_acc))
    assert summary["fairness"] == pytest.approx(np.std(client_acc))  # population std
    # Eq. 13: 2 rounds x 2 clients x (download + upload) x 124,198 dense float32 parameters
    assert summary["comm_mb_eq13"] == pytest.approx(2 * 2 * 2 * 124_198 * 4 / 1e6)
    assert summary["wall_s"] > 0
    assert json.loads((out / "config.json").read_text())["rounds"] == 2
    assert len((out / "metrics.csv").read_text().splitlines()) == 3
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert json.loads((out / "summary.json").read_text()) == summary
    assert again.returncode == 0


def test_bad_arguments_give_one_line(tmp_path, fixture_data_dir):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fedprune.cli",
            "train",
            "fedavg",
            "--dataset",
            "uci_har",
            "--rounds",
            "0",
            "--out",
            str(tmp_path / "r"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr == "fedprune: error: --rounds must be an integer >= 1, got 0\n"


def test_resume_equals_uninterrupted(tff_context, tmp_path, fixture_data_dir, monkeypatch):
    config = FedAvgConfig(dataset="uci_har", rounds=3, clients_per_round=3, local_epochs=1)
    full = run_fedavg(config, tmp_path / "full", fixture_data_dir, progress=False)

    interrupted(
        monkeypatch,
        lambda: run_fedavg(config, tmp_path / "resumed", fixture_data_dir, progress=False),
        after_round=1,
    )
    resumed = run_fedavg(config, tmp_path / "resumed", fixture_data_dir, progress=False)
    assert resumed["client_acc"] == full["client_acc"]
    assert resumed["avg_acc"] == full["avg_acc"]

    def losses(name):
        return [r["train_loss"] for r in read_metrics(tmp_path / name / METRICS)]

    assert losses("resumed") == losses("full")
