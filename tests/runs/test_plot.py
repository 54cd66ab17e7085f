"""``fedprune plot`` (:mod:`fedprune.runs.plot`): the curves from metrics rows (clusters of a
round averaged by their clients), one PNG for several runs, one-line errors."""

from __future__ import annotations

import pytest

from fedprune.cli import main
from fedprune.errors import DataError
from fedprune.runs import RunDir
from fedprune.runs.plot import curves, panel_of, plot_runs


def test_cluster_rows_of_a_round_are_averaged_by_their_clients():
    rows = [
        {"round": "1", "cluster": "-1", "clients": "10", "train_accuracy": "0.5", "phase": "x"},
        {"round": "2", "cluster": "0", "clients": "8", "train_accuracy": "0.9"},
        {"round": "2", "cluster": "1", "clients": "2", "train_accuracy": "0.4"},
        {"round": "2", "cluster": "-1", "clients": "10", "train_accuracy": "0.0"},
    ]
    xs, ys = curves(rows)["train_accuracy"]
    assert xs == [1, 2]
    assert ys == pytest.approx([0.5, (8 * 0.9 + 2 * 0.4) / 10])
    assert "phase" not in curves(rows)


def test_columns_go_to_their_panels():
    assert panel_of("train_accuracy") == panel_of("acc_pooled") == "accuracy"
    assert panel_of("train_loss") == "loss"
    assert panel_of("comm_mb_eq13") == panel_of("uplink_mb") == "communication (MB)"
    assert panel_of("ari") == panel_of("clusters") == "clusters"
    assert panel_of("lr") is None


def _run(path, accuracy):
    run = RunDir(path, {"seed": 0})
    for t in (1, 2, 3):
        run.append_metrics({"round": t, "acc": accuracy * t, "train_loss": 1 / t})
    return path


def test_several_runs_in_one_png(tmp_path):
    a, b = _run(tmp_path / "a", 0.1), _run(tmp_path / "b", 0.2)
    out = plot_runs([a, b], tmp_path / "both.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["plot", str(a)]) == 0
    assert (a / "curves.png").exists()


def test_a_folder_that_is_not_a_run_is_one_line(tmp_path, capsys):
    with pytest.raises(DataError, match="not a fedprune run directory"):
        plot_runs([tmp_path], tmp_path / "x.png")
    RunDir(tmp_path / "fresh", {"seed": 0})
    assert main(["plot", str(tmp_path / "fresh")]) == 2
    assert "has no metrics.csv yet: no round has finished" in capsys.readouterr().err
