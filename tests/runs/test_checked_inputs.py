"""What a run directory's reader refuses, each as one line naming the file and the fix: a
checkpoint with nan/inf, a round outside the run, arrays of another model's shapes; a
metrics.csv or JSON file that is not UTF-8; an ``--out`` that is empty or a link to nowhere.
Hand-made files only: fast, no TensorFlow."""

from __future__ import annotations

import dataclasses
import os
import re

import numpy as np
import pytest

from fedprune.engine.loop import Step, run_rounds
from fedprune.errors import ConfigError, DataError
from fedprune.runs import RunDir, check_out_dir, recorded_config
from fedprune.runs.finished import finished_summary

RESTART = "move it away and run the same command again to restart the run from round 0"


def _saved(tmp_path, round_num=2, arrays=None, scalars=None) -> RunDir:
    run = RunDir(tmp_path, {"method": "toy"})
    weights = [np.ones((2, 3), np.float32), np.zeros(3, np.float32)]
    run.save_checkpoint(round_num, arrays or {"w": weights}, scalars or {"wall_s": 1.0})
    return run


# --- checkpoint.npz: finite, its round within the run ----------------------------------------


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_checkpoint_with_non_finite_weights_is_refused(tmp_path, bad):
    w = np.ones((2, 3), np.float32)
    w[1, 2] = bad
    run = _saved(tmp_path, arrays={"w": [np.zeros(3), w], "ids": [np.arange(3)]})
    with pytest.raises(DataError) as err:
        run.load_checkpoint(5)
    assert str(err.value) == (
        f"{tmp_path / 'checkpoint.npz'} holds non-finite numbers ('w' array 1: 1 value), "
        f"which would be trained on and reported; {RESTART}"
    )


def test_finished_runs_checkpoint_with_nan_is_damaged(tmp_path):
    """Read by `fedprune finetune` (ClusterFL's W) and edge export (FedAvg's model)."""
    from fedprune.runs.artefacts import read_checkpoint_arrays

    _saved(tmp_path, arrays={"w": [np.array([1.0, np.nan, np.inf])]})
    with pytest.raises(DataError) as err:
        read_checkpoint_arrays(tmp_path)
    assert str(err.value) == (
        f"{tmp_path / 'checkpoint.npz'} is damaged (non-finite numbers in 'w' array 0: "
        "2 values); re-run training to write it again"
    )


def test_checkpoint_with_a_non_finite_scalar_is_refused(tmp_path):
    run = _saved(tmp_path, scalars={"wall_s": 1.0, "comm_bytes": float("nan")})
    with pytest.raises(DataError, match=r"holds non-finite numbers \(scalar 'comm_bytes' is nan\)"):
        run.load_checkpoint()


def test_integer_and_text_arrays_are_finite_by_nature(tmp_path):
    arrays = {"labels": [np.array([0, 2, 1])], "stop": [np.array("")], "empty": []}
    run = _saved(tmp_path, arrays=arrays)
    done, loaded, _ = run.load_checkpoint(2)
    assert done == 2 and loaded["labels"][0].tolist() == [0, 2, 1]


def test_checkpoint_beyond_the_rounds_of_the_run_is_refused(tmp_path):
    run = _saved(tmp_path, round_num=99)
    with pytest.raises(DataError) as err:
        run.load_checkpoint(4, "--rounds")
    assert str(err.value) == (
        f"{tmp_path / 'checkpoint.npz'} is at round 99, beyond the 4 rounds of this run "
        "(--rounds); give the --rounds it was made with, or move it away and run the same "
        "command again to restart the run from round 0"
    )
    assert run.load_checkpoint(99)[0] == 99  # the last round itself: a finished loop
    assert run.load_checkpoint()[0] == 99  # no total given: not checked


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (np.array(-1), "its round is -1, below 0"),
        (np.array(2.5), "its round is 2.5, not a whole number"),
        (np.array([1, 2]), "its round is [1, 2], not a whole number"),
    ],
)
def test_checkpoint_round_must_be_a_count(tmp_path, value, reason):
    run = _saved(tmp_path)
    with np.load(tmp_path / "checkpoint.npz") as z:
        flat = {k: z[k] for k in z.files}
    np.savez(tmp_path / "checkpoint.npz", **{**flat, "round": value})
    with pytest.raises(DataError, match=re.escape(f"checkpoint.npz is damaged ({reason}); move")):
        run.load_checkpoint(5)


def test_checkpoint_that_is_a_single_npy_is_damaged(tmp_path):
    run = RunDir(tmp_path, {})
    with open(tmp_path / "checkpoint.npz", "wb") as f:
        np.save(f, np.arange(3))
    with pytest.raises(DataError, match=r"checkpoint\.npz is damaged \("):
        run.load_checkpoint()


def test_checkpoint_shapes_are_the_models(tmp_path):
    run = _saved(tmp_path)
    _, arrays, _ = run.load_checkpoint()
    run.check_checkpoint_shapes(arrays, {"w": [(2, 3), (3,)], "absent": [(1,)]})
    with pytest.raises(DataError) as err:
        run.check_checkpoint_shapes(arrays, {"w": [(2, 3), (4,)]})
    assert str(err.value) == (
        f"{tmp_path / 'checkpoint.npz'} does not fit this run ('w' array 1 has shape (3,), this "
        f"run's is (4,)): it was made for another model or data; {RESTART}"
    )
    with pytest.raises(DataError, match=r"\(2 arrays 'w' where this run has 3\)"):
        run.check_checkpoint_shapes(arrays, {"w": [(2, 3), (3,), (3,)]})


def test_checkpoint_clusters_are_whole_numbers_within_k(tmp_path):
    run = _saved(tmp_path, arrays={"assignment": [np.array([0, 2, 1, 2])]})
    _, arrays, _ = run.load_checkpoint()
    run.check_checkpoint_labels(arrays, "assignment", 3)
    run.check_checkpoint_labels(arrays, "absent", 3)  # an optional array the run lacks
    with pytest.raises(DataError) as err:
        run.check_checkpoint_labels(arrays, "assignment", 2)
    assert str(err.value) == (
        f"{tmp_path / 'checkpoint.npz'} is damaged ('assignment' names cluster 2; this run has "
        f"clusters 0 to 1); {RESTART}"
    )
    with pytest.raises(DataError, match=r"'labels' holds float64 values, not cluster numbers"):
        run.check_checkpoint_labels({"labels": [np.array([0.0, 1.5])]}, "labels", 3)


@dataclasses.dataclass
class _State:
    w: np.ndarray

    def to_checkpoint(self):
        return {"w": [self.w]}, {}


def _loop(run, total=3, shapes=None, restore=None, **kw):
    return run_rounds(
        run,
        lambda: _State(np.zeros(4)),
        restore or (lambda _done, arrays, _scalars: _State(arrays["w"][0])),
        lambda t, state: Step(_State(state.w + 1), [{"round": t}]),
        total,
        desc="toy",
        progress=False,
        shapes=shapes,
        **kw,
    )


def test_round_loop_checks_before_it_restores(tmp_path):
    run = RunDir(tmp_path, {"method": "toy"})
    assert _loop(run, total=2).rounds == 2
    metrics = (tmp_path / "metrics.csv").read_bytes()
    with pytest.raises(DataError, match=r"is at round 2, beyond the 1 round of this run \(--t\)"):
        _loop(run, total=1, total_option="--t")
    with pytest.raises(DataError, match=r"beyond the 1 round of this run \(--max-iterations\)"):
        _loop(run, total=1, unit="it")
    with pytest.raises(DataError, match=r"'w' array 0 has shape \(4,\), this run's is \(5,\)"):
        _loop(run, shapes=lambda arrays: {"w": [(5,)]})
    with pytest.raises(DataError, match=r"checkpoint\.npz is damaged \(it lacks 'v'\); move it"):
        _loop(run, restore=lambda _d, arrays, _s: _State(arrays["v"][0]))
    with pytest.raises(DataError, match=r"is damaged \(a list of arrays is cut short\)"):
        _loop(run, restore=lambda _d, arrays, _s: _State(arrays["w"][1]))
    assert (tmp_path / "metrics.csv").read_bytes() == metrics  # refused before any change
    assert _loop(run, total=3, shapes=lambda arrays: {"w": [(4,)]}).state.w.tolist() == [3] * 4


# --- files that are not UTF-8 ----------------------------------------------------------------


def test_metrics_that_are_not_utf8_name_the_line(tmp_path):
    run = RunDir(tmp_path, {})
    run.append_metrics({"round": 1, "loss": 0.5})
    run.append_metrics({"round": 2, "loss": 0.25})
    data = (tmp_path / "metrics.csv").read_bytes()
    (tmp_path / "metrics.csv").write_bytes(data.replace(b"0.25", b"0.2\xff"))
    fix = "delete the line (or the file, losing the per-round history) and run the same command"
    for read in (run.metrics_rows, lambda: run.truncate_metrics(1)):
        with pytest.raises(DataError) as err:
            read()
        message = str(err.value)
        assert message.startswith(f"{tmp_path / 'metrics.csv'}, line 3: byte 0xff is not UTF-8")
        assert fix in message
    with pytest.raises(DataError, match="line 3: byte 0xff is not UTF-8"):
        run.append_metrics({"round": 3, "loss": 0.1})  # reads the header first
    (tmp_path / "metrics.csv").write_bytes(b"\xfe" + data)
    with pytest.raises(DataError, match="line 1: byte 0xfe is not UTF-8"):
        run.append_metrics({"round": 3, "loss": 0.1})


def test_metrics_rows_keep_their_meaning(tmp_path):
    (tmp_path / "metrics.csv").write_text('round,loss\n1,0.5\n\n2,"0,25"\n')
    assert RunDir(tmp_path, {}).metrics_rows() == [
        {"round": "1", "loss": "0.5"},
        {"round": "2", "loss": "0,25"},
    ]
    (tmp_path / "metrics.csv").write_text("round,loss\n1,0.5\n2\n")
    with pytest.raises(DataError, match=r"metrics\.csv, line 3: wrong number of fields"):
        RunDir(tmp_path, {}).metrics_rows()


@pytest.mark.parametrize("name", ["config.json", "summary.json"])
def test_json_files_that_are_not_utf8_are_damaged(tmp_path, name):
    (tmp_path / name).write_bytes('{"method": "caf\xe9"}'.encode("latin-1"))
    with pytest.raises(DataError, match=rf"{name} is damaged \(.*can't decode byte 0xe9"):
        (recorded_config if name == "config.json" else finished_summary)(tmp_path)


# --- --out -------------------------------------------------------------------------------------


@pytest.mark.parametrize("out", ["", "  "])
def test_empty_out_is_refused(out):
    with pytest.raises(ConfigError, match=r"^--out is empty; give the run's own folder"):
        check_out_dir(out)


def test_out_through_a_dangling_link_is_refused(tmp_path):
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    target = repr(str(tmp_path / "nowhere"))
    for out in (tmp_path / "link", tmp_path / "link" / "run"):
        with pytest.raises(ConfigError) as err:
            check_out_dir(out)
        assert str(err.value) == (
            f"--out {out}: {tmp_path / 'link'} is a symbolic link to {target}, which does not "
            "exist; make that folder or choose another --out"
        )
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    with pytest.raises(ConfigError, match="is a symbolic link to .*which does not exist"):
        check_out_dir(tmp_path / "loop")
    os.mkdir(tmp_path / "nowhere")
    assert check_out_dir(tmp_path / "link" / "run") == tmp_path / "link" / "run"
