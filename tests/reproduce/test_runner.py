"""The reproduction runner stops at the first failure or Ctrl-C instead of training on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from fedprune.errors import ConfigError
from fedprune.reproduce import runner


def _job(tmp_path, name: str, code: str) -> runner.Job:
    """A job whose 'training' is a Python snippet; it writes ``started`` in its directory."""
    target = tmp_path / name
    # like a real `fedprune train`: SIGINT raises KeyboardInterrupt even if the test runs
    # with SIGINT ignored (a background job of a script)
    script = (
        "import pathlib, sys, time\nfrom fedprune.engine import interrupts\n"
        f"interrupts.install()\npathlib.Path({str(target)!r}, 'started').touch()\n{code}"
    )
    return runner.Job(name, (sys.executable, "-c", script), target)


def test_a_failed_job_stops_the_others_and_cancels_the_pending(tmp_path, monkeypatch):
    monkeypatch.setattr(runner._Children, "GRACE_S", 1.0)
    slow = _job(tmp_path, "slow", "time.sleep(600)")
    failing = _job(tmp_path, "failing", "time.sleep(0.5); sys.exit(3)")
    pending = _job(tmp_path, "pending", "pass")
    for job in (slow, failing, pending):
        job.target.mkdir()
    t0 = time.monotonic()
    with pytest.raises(ConfigError, match=r"\[2/3\] failing failed \(exit 3\)"):
        runner.run_jobs([slow, failing, pending], parallel=2)
    # the slow child got SIGINT after the grace period instead of running its 600 s: about
    # 1.5 s idle (0.5 s until the failure, 1 s of grace); the bound is 200x that and half
    # the slow child's own time
    assert time.monotonic() - t0 < 300
    assert (slow.target / "started").exists()
    assert not (pending.target / "started").exists()


def test_an_interrupted_child_is_an_interrupt_not_a_failure(tmp_path):
    job = _job(tmp_path, "interrupted", "sys.exit(130)")
    job.target.mkdir()
    with pytest.raises(KeyboardInterrupt):
        runner.run_jobs([job, _job(tmp_path, "next", "pass")], parallel=1)
    assert not (tmp_path / "next").exists()


def test_ctrl_c_stops_a_parallel_reproduction(tmp_path):
    """SIGINT to the runner's process group, as Ctrl-C sends it: the running children end,
    the pending job never starts, and the runner exits with KeyboardInterrupt."""
    program = textwrap.dedent(
        f"""
        import pathlib, sys
        from fedprune.engine import interrupts
        from fedprune.reproduce import runner
        interrupts.install()  # as fedprune.cli.main does
        root = pathlib.Path({str(tmp_path)!r})
        def job(name, code):
            target = root / name
            target.mkdir()
            mark = f"pathlib.Path({{str(target)!r}}, 'started').touch()"
            setup = "from fedprune.engine import interrupts; interrupts.install()"
            script = f"import pathlib, time\\n{{setup}}\\n{{mark}}\\n{{code}}"
            return runner.Job(name, (sys.executable, "-c", script), target)
        try:
            runner.run_jobs([job("a", "time.sleep(60)"), job("b", "time.sleep(60)"),
                             job("c", "pass")], parallel=2)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(130)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", program], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    deadline = time.monotonic() + 30
    while not ((tmp_path / "a" / "started").exists() and (tmp_path / "b" / "started").exists()):
        assert time.monotonic() < deadline, "the two jobs did not start"
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "interrupted" in out
    assert not (tmp_path / "c" / "started").exists()


def test_the_study_clock_estimates_the_time_left_from_the_runs_it_trained():
    clock = runner.StudyClock(total=6)
    clock.skipped()  # finished before this command: counted done, not timed
    clock.started()
    clock.started()  # two at once
    assert clock.finished(600.0) == "in 10 min; 2 of 6 runs done, about 20 min left"
    # 4 left, 600 s each, 2 at once: 1,200 s
    clock.started()
    assert clock.finished(1200.0) == "in 20 min; 3 of 6 runs done, about 23 min left"
    # mean 900 s, 3 left, 2 running at once: 1,350 s = 22.5 min
    for _ in range(3):
        clock.started()
    clock.finished(30.0)
    clock.finished(30.0)
    assert clock.finished(30.0).endswith("6 of 6 runs done")
