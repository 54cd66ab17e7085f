"""Run a reproduction's training runs as ``fedprune train`` subprocesses, resumably.

Each job is an ordinary run directory: a finished one (with ``summary.json``) is skipped, an
interrupted one resumes from its checkpoint, so a whole reproduction resumes after an
interruption. With ``jobs=1`` the child's progress bar is shown; with more, runs go in
parallel, each child's output goes to ``<run>/train.log`` and every 30 s a line per active
run gives its last logged round/iteration. ``jobs="auto"`` (the Makefile's reproductions)
starts with one run and admits more while the machine's cores stand idle
(:mod:`fedprune.reproduce.auto_jobs`).

With ``shared=True`` each of the ``jobs`` threads runs its ``fedprune`` commands in one
long-lived process (:mod:`fedprune.reproduce.shared_process`) instead of a subprocess per
run: for studies of many runs of a few seconds, where starting Python, TensorFlow and TFF
costs more than the run.
"""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path

from fedprune.errors import ConfigError, DataError
from fedprune.interpreter import PYTHON
from fedprune.reproduce.auto_jobs import AUTO, AutoJobs, Slots
from fedprune.reproduce.shared_process import SharedProcess
from fedprune.runs import names
from fedprune.runs.finished import is_finished
from fedprune.runs.lock import FolderInUse, holder
from fedprune.runs.run_dir import read_metrics


@dataclasses.dataclass(frozen=True)
class Job:
    """One run: a label for progress lines, its ``fedprune`` command and its run directory."""

    label: str
    command: tuple[str, ...]
    target: Path


_FEDPRUNE = (*PYTHON, "-m", "fedprune.cli")  # nothing imported from the current folder


def train_command(method: str, target: Path, *args: str) -> tuple[str, ...]:
    """``python -m fedprune.cli train METHOD ... --out TARGET`` with this interpreter."""
    return (*_FEDPRUNE, "train", method, *args, "--out", str(target))


def finetune_command(source: Path, target: Path, ft_epochs: str, *args: str) -> tuple[str, ...]:
    """``python -m fedprune.cli finetune SOURCE --ft-epochs E,... --out TARGET ...``."""
    return (
        *_FEDPRUNE,
        "finetune",
        str(source),
        "--ft-epochs",
        ft_epochs,
        "--out",
        str(target),
        *args,
    )


def fedprune_arguments(command: Sequence[str]) -> tuple[str, ...] | None:
    """The ``fedprune`` arguments of a :func:`train_command`-style command, else ``None``."""
    n = len(_FEDPRUNE)
    return tuple(command[n:]) if tuple(command[:n]) == _FEDPRUNE else None


def _say(line: str) -> None:
    """One progress line in one write: ``print`` writes the text and its newline separately,
    so the lines of two training threads could run together ("...: done[30/60] ...")."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


class StudyClock:
    """Done / total runs of a study and its estimated time left: the mean time of the runs
    trained by this command, times the runs left, over the runs training at once."""

    def __init__(self, total: int):
        self.total = total
        self.done = 0
        self.running = 0
        self.seconds: list[float] = []
        self._lock = threading.Lock()

    def started(self) -> None:
        with self._lock:
            self.running += 1

    def skipped(self) -> None:
        """A run finished before this command."""
        with self._lock:
            self.done += 1

    def finished(self, seconds: float) -> str:
        """The progress words after a run that took ``seconds``."""
        with self._lock:
            at_once = max(self.running, 1)
            self.running -= 1
            self.done += 1
            self.seconds.append(seconds)
            left = self.total - self.done
            words = f"in {_duration(seconds)}; {self.done} of {self.total} runs done"
            if left:
                eta = sum(self.seconds) / len(self.seconds) * left / min(at_once, left)
                words += f", about {_duration(eta)} left"
            return words


def _duration(seconds: float) -> str:
    minutes = int(seconds / 60 + 0.5)
    if minutes < 1:
        return f"{seconds:.0f} s"
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def run_jobs(jobs: Sequence[Job], parallel: int | str = 1, shared: bool = False) -> float:
    """Train every unfinished job, ``parallel`` at a time (or ``"auto"``); returns the wall
    time (s). ``shared``: run ``fedprune`` commands in long-lived processes, one per thread
    (module docstring).

    The first failed job, or Ctrl-C, stops the reproduction: jobs not yet started are
    cancelled, and running children get SIGINT (if Ctrl-C's own SIGINT has not already ended
    them within a grace period), so they checkpoint and the command resumes later. Before,
    ``--jobs 2`` went on starting new runs after Ctrl-C until the whole grid was done."""
    start = time.perf_counter()
    total = len(jobs)
    children = _Children()
    clock = StudyClock(total)
    auto = AutoJobs() if parallel == AUTO else None
    slots = auto.slots if auto is not None else Slots(int(parallel), int(parallel))

    def train(index: int, job: Job) -> None:
        label = f"[{index}/{total}] {job.label}"
        if is_finished(job.target):
            clock.skipped()
            _say(f"{label}: done")
            return
        if children.stopping.is_set():
            return
        if not slots.acquire(children.stopping):
            return
        try:
            run_one(label, job)
        finally:
            slots.release()

    def run_one(label: str, job: Job) -> None:
        owner = holder(job.target)  # checked before the log below is written into it
        if owner is not None:
            raise FolderInUse(
                f"{label}: {job.target} is in use by fedprune process {owner}; wait for it to "
                "end, or give the study another --out"
            )
        _say(f"{label}: training")
        clock.started()
        began = time.perf_counter()
        argv = fedprune_arguments(job.command) if shared else None
        quiet = () if parallel == 1 else ("--no-progress",)
        log = None if parallel == 1 else job.target / "train.log"
        if log is not None:
            job.target.mkdir(parents=True, exist_ok=True)
        if argv is not None:
            code = children.run_shared([*argv, *quiet], log)
        elif log is None:
            code = children.run(job.command, subprocess.DEVNULL)
        else:
            with open(log, "ab") as out:
                code = children.run([*job.command, *quiet], out, subprocess.STDOUT)
        if code != 0:  # stop before this thread takes the next job
            children.stopping.set()
        if code in (130, -signal.SIGINT):
            raise KeyboardInterrupt
        if code != 0:
            raise ConfigError(f"{label} failed (exit {code}); see {job.target}")
        _say(f"{label}: finished {clock.finished(time.perf_counter() - began)}")

    pool = ThreadPoolExecutor(max_workers=slots.limit)
    futures = [pool.submit(train, i, job) for i, job in enumerate(jobs, 1)]
    try:
        while True:
            done, pending = wait(futures, timeout=30, return_when=FIRST_EXCEPTION)
            for future in done:
                future.result()  # the first failure (or interrupt) is raised here
            if not pending:
                break
            if auto is not None:
                auto.check(_say)
            report_progress([job.target for job in jobs])
    except BaseException:
        children.stop()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        children.close_shared()
    return time.perf_counter() - start


class _Children:
    """The running ``fedprune train`` children, so a stop can reach them."""

    GRACE_S = 5.0  # Ctrl-C reaches the children too; they end in well under a second

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen] = set()
        self._shared: list[SharedProcess] = []
        self._local = threading.local()  # each thread's shared process

    def run_shared(self, argv: Sequence[str], log: Path | None) -> int:
        """``fedprune ARGV`` in this thread's shared process (started when there is none or
        it ended)."""
        handle = getattr(self._local, "shared", None)
        if handle is None or handle.process.poll() is not None:
            handle = self._local.shared = SharedProcess()
            with self._lock:
                self._shared.append(handle)
                self._running.add(handle.process)
        code = handle.run(argv, None if log is None else str(log))
        if code != 0:  # the process ends after such a command
            handle.close()
        return code

    def close_shared(self) -> None:
        """End every shared process (each finishes the command it runs)."""
        with self._lock:
            shared = list(self._shared)
        for handle in shared:
            handle.close()

    def run(self, command: Sequence[str], stdout: object, stderr: object = None) -> int:
        child = subprocess.Popen(command, stdout=stdout, stderr=stderr)
        with self._lock:
            self._running.add(child)
        try:
            return child.wait()
        finally:
            with self._lock:
                self._running.discard(child)

    def stop(self) -> None:
        """No new child starts; a child still running after the grace period gets SIGINT."""
        self.stopping.set()
        deadline = time.monotonic() + self.GRACE_S
        with self._lock:
            running = list(self._running)
            shared = list(self._shared)
        for handle in shared:  # an idle one ends now, a busy one after its command
            handle.end_input()
        for child in running:
            try:
                child.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.send_signal(signal.SIGINT)


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
