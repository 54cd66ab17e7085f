"""Every Python child fedprune starts imports nothing from the folder it is started in
(:mod:`fedprune.interpreter`): a module planted there (``argparse.py``, which each child
imports) would run with the user's rights. Each test starts the real child from such a
folder (the sandbox forwarder of a local TFF worker, the reproduction command server, a
reproduction's ``fedprune train``) and checks that the planted module never ran; the first
checks that the plant works on a child started without ``-P``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fedprune.interpreter import PYTHON

PLANTED = """\
import os, sys
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "MARKER"), "w") as f:
    f.write(f"pid={os.getpid()} uid={os.getuid()} argv={sys.argv}")
raise SystemExit(97)
"""


@pytest.fixture
def planted(tmp_path, monkeypatch) -> Path:
    """A working folder holding a planted ``argparse.py``; the test runs from it."""
    folder = tmp_path / "shared-project"
    folder.mkdir()
    (folder / "argparse.py").write_text(PLANTED)
    monkeypatch.chdir(folder)
    return folder


def test_the_plant_runs_in_a_child_started_without_isolation(planted):
    """Without ``-P`` the planted module is imported: the marker the other tests look for
    would appear (so their finding none means something)."""
    done = subprocess.run(
        [sys.executable, "-m", "fedprune.workers.sandbox", "--help"], capture_output=True
    )
    assert done.returncode == 97
    assert "fedprune/workers/sandbox.py" in (planted / "MARKER").read_text()


def test_python_is_this_interpreter_without_the_current_folder():
    assert PYTHON == (sys.executable, "-P")
    done = subprocess.run(
        [*PYTHON, "-c", "import sys; print(sys.flags.safe_path)"], capture_output=True, text=True
    )
    assert done.stdout.strip() == "True"


@pytest.mark.slow
def test_the_sandbox_forwarder_ignores_the_current_folder(planted, tmp_path):
    from fedprune.workers import local

    reason = local.sandbox_unavailable_reason()
    if reason is not None:
        pytest.skip(f"the sandboxed worker cannot start here: {reason}")
    worker = local.WorkerProcess(tmp_path / "w.log")
    try:
        assert worker.sandboxed and len(worker.pids()) == 2  # forwarder and worker_binary
    finally:
        worker.stop()
    assert not (planted / "MARKER").exists()


def test_the_command_server_ignores_the_current_folder(planted):
    from fedprune.reproduce.shared_process import SharedProcess

    handle = SharedProcess()
    try:
        assert handle.run(["train", "--help"], str(planted.parent / "log")) == 0
    finally:
        handle.close()
    assert handle.process.returncode == 0
    assert "usage: fedprune train" in (planted.parent / "log").read_text()
    assert not (planted / "MARKER").exists()


def test_a_reproduction_run_ignores_the_current_folder(planted):
    from fedprune.reproduce.runner import fedprune_arguments, train_command

    command = train_command("fedavg", planted.parent / "run", "--help")
    assert fedprune_arguments(command)[:2] == ("train", "fedavg")
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0 and "usage: fedprune train fedavg" in done.stdout
    assert not (planted / "MARKER").exists()
