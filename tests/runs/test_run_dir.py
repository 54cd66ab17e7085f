"""RunDir: the writer's view of a run directory (config, checkpoints, metrics)."""

import numpy as np
import pytest

from fedprune.errors import ConfigError
from fedprune.runs import RunDir


def test_config_mismatch_is_refused(tmp_path):
    RunDir(tmp_path, {"rounds": 5, "seed": 0})
    RunDir(tmp_path, {"rounds": 5, "seed": 0})  # same config: fine (resume)
    with pytest.raises(ConfigError, match="differs in: seed"):
        RunDir(tmp_path, {"rounds": 5, "seed": 1})


def test_checkpoint_roundtrip(tmp_path):
    run = RunDir(tmp_path, {})
    assert run.load_checkpoint() is None
    w = [np.arange(6.0).reshape(2, 3), np.ones(2, np.float32)]
    run.save_checkpoint(3, {"w": w, "empty": []}, {"wall_s": 1.5})
    done, arrays, scalars = run.load_checkpoint()
    assert done == 3 and scalars == {"wall_s": 1.5} and arrays["empty"] == []
    assert all(np.array_equal(a, b) for a, b in zip(arrays["w"], w))


def test_metrics_truncated_to_checkpoint(tmp_path):
    run = RunDir(tmp_path, {})
    for r in (1, 2, 3):
        run.append_metrics({"round": r, "loss": 1.0 / r})
    run.truncate_metrics(2)
    assert [int(row["round"]) for row in run.metrics_rows()] == [1, 2]
    run.truncate_metrics(0)
    assert run.metrics_rows() == []


def test_metrics_from_an_older_version_gain_the_new_columns(tmp_path):
    run = RunDir(tmp_path, {})
    run.append_metrics({"round": 1, "acc": 0.5})  # written before a column existed
    run.append_metrics({"round": 2, "acc": 0.6, "splits": 3})
    run.append_metrics({"round": 3, "splits": 1})  # a row without a column leaves it empty
    assert run.metrics_rows() == [
        {"round": "1", "acc": "0.5", "splits": ""},
        {"round": "2", "acc": "0.6", "splits": "3"},
        {"round": "3", "acc": "", "splits": "1"},
    ]
    (tmp_path / "metrics.csv").write_text("")  # an empty file gets its header
    run.append_metrics({"round": 1, "acc": 0.5})
    assert run.metrics_rows() == [{"round": "1", "acc": "0.5"}]
