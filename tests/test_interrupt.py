"""Ctrl-C through the command line: SIGINT to the whole process group (what a terminal sends)
ends a run within 10 s with one line, leaves no TFF worker, and the rerun equals an
uninterrupted run. FedCRef's Ctrl-C, at each of its stages, is
``tests/algorithms/test_fedcref_interrupts.py``'s."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fedprune.runs.events import read_tags

pytestmark = pytest.mark.slow

# method: (arguments, when to interrupt: a test on metrics.csv's rows)
CASES = {
    "fedavg": (
        ["train", "fedavg", "--dataset", "uci_har", "--rounds", "6", "--clients-per-round", "3"]
        + ["--local-epochs", "1"],
        lambda rows: any(int(row["round"]) >= 2 for row in rows),
    ),
    # phase 3 (prune rounds) with K = 3, per-cluster rounds in concurrent threads; the
    # interrupt comes after the first prune round, with a mask update and fine-tuning to go
    "caafp": (
        ["train", "caafp", "--dataset", "uci_har", "--phases", "1,1,4", "--clusters", "3"]
        + ["--clients-per-round", "6", "--local-epochs", "6", "--start-sparsity", "0.5"]
        + ["--target-sparsity", "0.7", "--prune-frequency", "2", "--ft-epochs", "1"],
        lambda rows: any(row.get("phase") == "prune" for row in rows),
    ),
}


# The child starts with SIGINT at its default, as a terminal's foreground job: a test run
# started in the background by a non-interactive shell ignores SIGINT, and children inherit
# that (POSIX), so the run would never see the signal. A one-line wrapper resets it and
# execs fedprune: a preexec_fn would make Popen fork() the test process itself, whose gRPC
# fork handlers abort the child once earlier tests have used TFF (seen in a clean-clone CI).
SIGINT_DEFAULT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, '-m', 'fedprune.cli', *sys.argv[1:]])"
)


def _fedprune(args: list[str], data_dir: Path, out: Path) -> subprocess.Popen:
    command = [sys.executable, "-c", SIGINT_DEFAULT, *args, "--out", str(out), "--no-progress"]
    command += ["--data-dir", str(data_dir)]
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )


def _rows(out: Path) -> list[dict]:
    path = out / "metrics.csv"
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _numbers(out: Path) -> dict:
    summary = json.loads((out / "summary.json").read_text())
    return {k: v for k, v in summary.items() if k not in ("wall_s", "cpu_s")}


def _group_alive(pgid: int) -> list[str]:
    found = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True).stdout
    return found.split()


@pytest.mark.parametrize("method", sorted(CASES))
def test_sigint_to_the_process_group_stops_cleanly_and_resumes(method, tmp_path, fixture_data_dir):
    args, ready = CASES[method]
    data_dir = fixture_data_dir
    out = tmp_path / "run"
    proc = _fedprune(args, data_dir, out)
    deadline = time.monotonic() + 300
    while not ready(_rows(out)):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never reached the point to interrupt"
        time.sleep(0.2)
    assert not (out / "summary.json").exists(), "the run finished before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"{method}: still running 10 s after SIGINT")
    assert proc.returncode == 130, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1] == "fedprune: interrupted; run the same command again to resume", err
    assert "Traceback" not in err
    # the workers got the same SIGINT; on a loaded machine one may need a moment to exit
    grace = time.monotonic() + 5.0
    while _group_alive(proc.pid) and time.monotonic() < grace:
        time.sleep(0.1)
    assert _group_alive(proc.pid) == [], "a process of the run (a TFF worker) outlived it by 5 s"

    rerun = _fedprune(args, data_dir, out)
    _, err = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, err
    straight = _fedprune(args, data_dir, tmp_path / "straight")
    _, err = straight.communicate(timeout=600)
    assert straight.returncode == 0, err
    assert _numbers(out) == _numbers(tmp_path / "straight")
    # the TensorBoard files: the same tags and steps as the uninterrupted run, each step once
    resumed, uninterrupted = read_tags(out), read_tags(tmp_path / "straight")
    assert resumed == uninterrupted and resumed
