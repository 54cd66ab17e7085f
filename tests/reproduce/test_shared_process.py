"""Runs in a shared process (``runner.run_jobs(shared=True)``) are the runs of fresh
``fedprune train`` processes: same run directory, same status, output in the same place."""

from __future__ import annotations

import json
import os
import signal
import sys

import numpy as np
import pytest

from fedprune.reproduce import runner
from fedprune.reproduce.shared_process import SharedProcess
from tests.algorithms.fedhire.test_run import _blobs_ecoli

BAD = ["train", "fedhire", "--dataset", "ecoli", "--eta", "-1", "--out"]


def _jobs(data, out) -> list[runner.Job]:
    common = ("--dataset", "ecoli", "--partition", "paper", "--clients", "3", "--k-star", "3")
    common += ("--data-dir", str(data))
    return [
        runner.Job(name, runner.train_command(method, out / name, *common, *args), out / name)
        for name, method, args in (
            ("fedhire-s0", "fedhire", ("--seed", "0")),
            ("fedhire-s1", "fedhire", ("--seed", "1")),
            ("kfed-s0", "kfed", ("--seed", "0")),
        )
    ]


_TIMES = ("wall_s", "cpu_s", "client_cpu_s", "server_cpu_s")


def _without_times(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k not in _TIMES}


@pytest.mark.slow
def test_shared_process_runs_equal_fresh_process_runs(tmp_path, monkeypatch):
    _blobs_ecoli(tmp_path / "data")
    fresh = _jobs(tmp_path / "data", tmp_path / "fresh")
    shared = _jobs(tmp_path / "data", tmp_path / "shared")
    runner.run_jobs(fresh, parallel=2)
    started = []

    class Counted(SharedProcess):
        def __init__(self) -> None:
            super().__init__()
            started.append(self.process.pid)

    def no_subprocess(*args: object, **kwargs: object) -> int:
        raise AssertionError("a shared run went to a subprocess of its own")

    monkeypatch.setattr(runner, "SharedProcess", Counted)
    monkeypatch.setattr(runner._Children, "run", no_subprocess)
    runner.run_jobs(shared, parallel=2, shared=True)
    assert 1 <= len(started) <= 2  # three runs, at most one process per thread
    for a, b in zip(fresh, shared):
        got = json.loads((b.target / "summary.json").read_text())
        assert _without_times(got) == _without_times(
            json.loads((a.target / "summary.json").read_text())
        )
        with np.load(a.target / "labels.npz") as la, np.load(b.target / "labels.npz") as lb:
            assert sorted(la) == sorted(lb)
            for key in la:
                np.testing.assert_array_equal(la[key], lb[key])
        # --jobs 2: the run's printed summary went to its train.log, as a subprocess's does
        assert "adjusted Rand index" in (b.target / "train.log").read_text()
    # finished runs are skipped: nothing is trained again
    before = {j.target: (j.target / "summary.json").stat().st_mtime_ns for j in shared}
    runner.run_jobs(shared, parallel=1, shared=True)
    assert before == {j.target: (j.target / "summary.json").stat().st_mtime_ns for j in shared}


def test_a_failed_command_reports_its_status_and_its_line_ends_the_process(tmp_path):
    log = tmp_path / "train.log"
    handle = SharedProcess()
    try:
        assert handle.run([*BAD, str(tmp_path / "run")], str(log)) == 2
        assert handle.process.wait(60) == 2  # it does not take another command
        assert "fedprune: error:" in log.read_text() and "eta" in log.read_text()
        assert not (tmp_path / "run").exists()
        assert handle.run(["--help"], None) == 2  # it ended: its status, not a hang
    finally:
        handle.close()


def test_an_unknown_argument_is_argparses_status_not_a_crash(tmp_path):
    handle = SharedProcess()
    try:
        assert handle.run(["train", "no-such-method"], str(tmp_path / "log")) == 2
        assert "invalid choice" in (tmp_path / "log").read_text()
    finally:
        handle.close()


def test_ctrl_c_between_commands_ends_it_as_an_interrupt():
    handle = SharedProcess()
    try:
        # an answered command: its SIGINT handler is in place, it waits for the next one
        assert handle.run(["train", "--help"], None) == 0
        os.kill(handle.process.pid, signal.SIGINT)
        assert handle.process.wait(60) == 130
        assert handle.run(["--help"], None) == 130
    finally:
        handle.close()


def test_a_stopping_runner_gets_an_interrupt_not_a_success(tmp_path):
    handle = SharedProcess()
    handle.end_input()
    assert handle.run([*BAD, str(tmp_path / "run")], None) == 130
    assert handle.process.wait(60) == 0


def test_only_fedprune_commands_share_a_process(tmp_path):
    command = runner.train_command("kfed", tmp_path, "--seed", "0")
    assert runner.fedprune_arguments(command) == (
        *("train", "kfed", "--seed", "0", "--out", str(tmp_path)),
    )
    assert runner.fedprune_arguments((sys.executable, "-c", "pass")) is None
