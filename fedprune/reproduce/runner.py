"""Run a reproduction's training runs as ``fedprune train`` subprocesses, resumably.

Each job is an ordinary run directory: a finished one (with ``summary.json``) is skipped, an
interrupted one resumes from its checkpoint, so a whole reproduction resumes after an
interruption. With ``jobs=1`` the child's progress bar is shown; with more, runs go in
parallel, each child's output goes to ``<run>/train.log`` and every 30 s a line per active
run gives its last logged round/iteration. One run leaves about a third of a 2-core machine
idle; two in parallel finished in 304 s what took 458 s one after the other (EfficientFL +
FedSNIP on UCI-HAR), so the Makefile's reproductions use ``--jobs 2``.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

from fedprune.errors import ConfigError, DataError
from fedprune.runs import names
from fedprune.runs.finished import is_finished
from fedprune.runs.run_dir import read_metrics


@dataclasses.dataclass(frozen=True)
class Job:
    """One run: a label for progress lines, its ``fedprune`` command and its run directory."""

    label: str
    command: tuple[str, ...]
    target: Path


def train_command(method: str, target: Path, *args: str) -> tuple[str, ...]:
    """``python -m fedprune.cli train METHOD ... --out TARGET`` with this interpreter."""
    return (sys.executable, "-m", "fedprune.cli", "train", method, *args, "--out", str(target))


def _say(line: str) -> None:
    """One progress line in one write: ``print`` writes the text and its newline separately,
    so the lines of two training threads could run together ("...: done[30/60] ...")."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def run_jobs(jobs: Sequence[Job], parallel: int = 1) -> float:
    """Train every unfinished job; returns the wall time (s)."""
    start = time.perf_counter()
    total = len(jobs)

    def train(index: int, job: Job) -> None:
        label = f"[{index}/{total}] {job.label}"
        if is_finished(job.target):
            _say(f"{label}: done")
            return
        _say(f"{label}: training")
        if parallel == 1:
            code = subprocess.run(job.command, stdout=subprocess.DEVNULL).returncode
        else:
            job.target.mkdir(parents=True, exist_ok=True)
            with open(job.target / "train.log", "ab") as log:
                code = subprocess.run(
                    [*job.command, "--no-progress"], stdout=log, stderr=subprocess.STDOUT
                ).returncode
        if code != 0:
            raise ConfigError(f"{label} failed (exit {code}); see {job.target}")
        _say(f"{label}: finished")

    if parallel == 1:
        for i, job in enumerate(jobs, 1):
            train(i, job)
    else:
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            futures = [pool.submit(train, i, job) for i, job in enumerate(jobs, 1)]
            while wait(futures, timeout=30).not_done:
                report_progress([job.target for job in jobs])
            for future in futures:
                future.result()
    return time.perf_counter() - start


def report_progress(dirs: Sequence[Path]) -> None:
    """One line per unfinished run that has started: its last logged round and phase."""
    for path in dirs:
        if is_finished(path):
            continue
        try:
            rows = read_metrics(path / names.METRICS)
        except DataError:  # a row being written right now: report it next time
            continue
        if rows:
            last = rows[-1]
            step = "round" if "round" in last else "iteration"
            phase = f", phase {last['phase']}" if "phase" in last else ""
            _say(f"  {path.name}: {step} {last.get(step)}{phase}")
