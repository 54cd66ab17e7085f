"""One process per output folder (:mod:`fedprune.runs.lock`): the lock itself, and two real
``fedprune train`` processes on one ``--out``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fedprune.cli import main
from fedprune.reproduce import runner
from fedprune.runs.lock import LOCK_FILE, FolderInUse, FolderLock, holder
from fedprune.runs.run_dir import read_metrics
from tests.conftest import har_arrays, write_uci_har

TIMING = {"wall_s", "seconds", "round_s"}


def test_a_second_lock_is_refused_naming_the_holder(tmp_path):
    with FolderLock(tmp_path / "run"):
        assert holder(tmp_path / "run") == os.getpid()
        with pytest.raises(FolderInUse, match=rf"--out .*run is in use by fedprune process "
                           rf"{os.getpid()}; wait for it to end"):  # fmt: skip
            FolderLock(tmp_path / "run").acquire()
    assert holder(tmp_path / "run") is None


def test_release_removes_the_lock_file_and_only_the_folders_it_made(tmp_path):
    (tmp_path / "kept").mkdir()
    with FolderLock(tmp_path / "kept" / "a" / "b"):
        assert (tmp_path / "kept" / "a" / "b" / LOCK_FILE).read_text() == f"{os.getpid()}\n"
    assert list((tmp_path / "kept").iterdir()) == []  # a/ and a/b/ were made, and removed
    with FolderLock(tmp_path / "kept" / "a"):
        (tmp_path / "kept" / "a" / "result.txt").write_text("x")
    assert sorted(p.name for p in (tmp_path / "kept" / "a").iterdir()) == ["result.txt"]


def test_a_refused_lock_makes_and_removes_nothing(tmp_path):
    with FolderLock(tmp_path / "run"):
        before = sorted(p.name for p in (tmp_path / "run").iterdir())
        with pytest.raises(FolderInUse):
            FolderLock(tmp_path / "run").acquire()
        assert sorted(p.name for p in (tmp_path / "run").iterdir()) == before


def test_a_stale_lock_file_of_a_crashed_process_is_taken_over(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / LOCK_FILE).write_text("999999999\n")  # no process holds it
    assert holder(tmp_path / "run") is None
    with FolderLock(tmp_path / "run"):
        assert holder(tmp_path / "run") == os.getpid()


def test_a_lock_of_a_killed_process_is_released(tmp_path):
    code = f"from fedprune.runs.lock import FolderLock; FolderLock({str(tmp_path)!r}).acquire()"
    child = subprocess.Popen([sys.executable, "-c", code + "; import time; time.sleep(60)"])
    try:
        deadline = time.monotonic() + 30
        while holder(tmp_path) != child.pid:
            assert time.monotonic() < deadline, "the child never took the lock"
            time.sleep(0.05)
        child.kill()
        child.wait()
        assert holder(tmp_path) is None
    finally:
        child.kill()


def test_a_lock_file_that_is_a_symlink_is_not_followed(tmp_path):
    (tmp_path / "run").mkdir()
    target = tmp_path / "victim"
    target.write_text("keep\n")
    (tmp_path / "run" / LOCK_FILE).symlink_to(target)
    with pytest.raises(OSError):
        FolderLock(tmp_path / "run").acquire()
    assert target.read_text() == "keep\n"


def test_a_reproduction_refuses_a_run_another_process_holds(tmp_path, capsys):
    target = tmp_path / "results" / "runs" / "fedavg-s0"
    job = runner.Job("fedavg-s0", (sys.executable, "-c", "raise SystemExit(0)"), target)
    with FolderLock(target):
        with pytest.raises(FolderInUse, match=f"fedavg-s0: {target} is in use by fedprune "
                           f"process {os.getpid()}"):  # fmt: skip
            runner.run_jobs([job], parallel=2)
        assert sorted(p.name for p in target.iterdir()) == [LOCK_FILE]  # no train.log


def test_a_second_reproduction_of_a_study_into_one_out_is_refused(tmp_path, capsys):
    out = tmp_path / "results"
    with FolderLock(out, name=".fedprune-reproduce-table2.lock"):
        assert main(["reproduce", "table2", "--quick", "--out", str(out)]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1 and f"is in use by fedprune process {os.getpid()}" in errors[0]
    assert not out.exists()


def _without_timing(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_timing(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [_without_timing(v) for v in value]
    return value


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
        and p.name != LOCK_FILE
        and ".tmp" not in p.name
        and "tff-logs" not in p.parts
    }  # the first run's files, without those it is replacing right now


def _attempt(argv: list[str], capsys) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = main(argv)
    return code, [line for line in capsys.readouterr().err.splitlines() if line.strip()]


@pytest.mark.slow
def test_two_processes_on_one_out_the_first_finishes_as_alone(tmp_path, capsys):
    """A run in a real process; while it trains, the same command and one with another
    ``--lr`` get one error line and touch nothing, once before the first has written its
    files and once while it trains its rounds; the first's summary.json and metrics equal
    those of the same run alone."""
    data = tmp_path / "data"
    (data / "uci_har").mkdir(parents=True)
    write_uci_har(data / "uci_har", *har_arrays(6, subjects=tuple(range(1, 7))))
    command = ["train", "fedavg", "--dataset", "uci_har", "--rounds", "25"]
    command += ["--clients-per-round", "2", "--local-epochs", "2", "--no-progress"]
    command += ["--data-dir", str(data)]
    run = tmp_path / "run"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    first = subprocess.Popen(
        [sys.executable, "-m", "fedprune.cli", *command, "--out", str(run)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    refused = (
        f"fedprune: error: --out {run} is in use by fedprune process {first.pid}; "
        "wait for it to end (or stop it), or choose another --out"
    )
    try:
        for ready, extra in ((".fedprune.lock", []), ("metrics.csv", ["--lr", "0.5"])):
            deadline = time.monotonic() + 120
            while not (run / ready).exists() or holder(run) != first.pid:
                assert first.poll() is None, first.communicate()
                assert time.monotonic() < deadline, f"the first run never wrote {ready}"
                time.sleep(0.01)
            for argv in ([*command, *extra], [*command, "--lr", "0.2"]):
                before = _snapshot(run)
                assert _attempt([*argv, "--out", str(run)], capsys) == (2, [refused])
                assert set(_snapshot(run)) >= set(before)  # nothing of the first removed
            assert first.poll() is None, "the first run ended before the second tried"
        out, err = first.communicate(timeout=300)
        assert first.returncode == 0, err
    finally:
        first.kill()
    assert not (run / LOCK_FILE).exists()
    alone = tmp_path / "alone"
    assert main([*command, "--out", str(alone)]) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert _without_timing(summary) == _without_timing(
        json.loads((alone / "summary.json").read_text())
    )
    assert _without_timing(read_metrics(run / "metrics.csv")) == _without_timing(
        read_metrics(alone / "metrics.csv")
    )  # every round once
