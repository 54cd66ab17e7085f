"""Ctrl-C at FedCRef's stage boundaries and at random points: ``fedprune train fedcref`` as a
real process on fixture data gets SIGINT (to its process group, as a terminal sends it), ends
within 2 s with the interrupted line, and the run resumed to its end equals an uninterrupted
one.

One run directory is interrupted again and again, each time at a later stage (a point only
counts if the run has reached it in *this* process):

* ``system built``: ``config.json`` appears (the TFF process is built next, then iteration 1);
* ``iteration 1``: a random moment 0.5-6 s later (building the TFF process, ~4 s, then
  local autoencoders, association, FedAvg);
* ``iteration 2``: iteration 1's metrics row appears (its checkpoint is being written; then
  iteration 2's local training);

then the run is resumed to its end. After each interrupt no process of the run's group (its
TFF worker) is left, and the resumed run's TensorBoard steps are the uninterrupted run's. Each
process spends ~5 s importing and ~4 s building its TFF process, hence few points here; the
random moments of the script below cover the rest.

``python -m tests.algorithms.test_fedcref_interrupts N`` interrupts N fresh runs at random
moments instead (each resumed and compared; not part of the suite).
"""

from __future__ import annotations

import csv
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from fedprune.runs.events import read_tags

# 4 clients of 2-3 pattern classes; iteration 1 (~4.5 s) forms a community (FedAvg on TFF),
# iteration 2 (~0.6 s) none, and the run stops after it (no active client left)
ARGS = ["train", "fedcref", "--dataset", "mnist", "--clients", "4", "--samples-per-class", "10"]
ARGS += ["--dirtiness", "0.2", "--epochs", "10", "--fl-rounds", "1", "--max-iterations", "4"]
ARGS += ["--batch-size", "8", "--theta", "0.3", "--no-progress"]
INTERRUPTED = "fedprune: interrupted; run the same command again to resume"
# how soon after SIGINT the run must have exited: well under a second idle, while an
# interrupt that waited for the iteration to end would take the rest of its 10 epochs
EXIT_WITHIN_S = 10.0

# A terminal's foreground job has SIGINT at its default; a test started in the background
# by a script inherits it ignored. Reset it in a wrapper that execs fedprune (a preexec_fn
# would fork this process, whose gRPC fork handlers abort the child after TFF was used).
SIGINT_DEFAULT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, '-m', 'fedprune.cli', *sys.argv[1:]])"
)


def write_data(root: Path) -> Path:
    """The MNIST-format pattern images of ``test_fedcref_run`` under ``root/mnist``."""
    from fedprune.data import images
    from tests.algorithms.test_fedcref_run import pattern_images
    from tests.data.test_images import write_idx_pair

    write_idx_pair(root / "mnist", images.file_names("mnist", "train"), *pattern_images())
    return root


def start(data_dir: Path, out: Path) -> subprocess.Popen:
    command = [sys.executable, "-c", SIGINT_DEFAULT, *ARGS, "--out", str(out)]
    return subprocess.Popen(
        [*command, "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
        env={**os.environ, "TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "0")},
    )


def metrics_rows(out: Path) -> int:
    path = out / "metrics.csv"
    if not path.exists():
        return 0
    with open(path, newline="") as f:
        return len(list(csv.DictReader(f)))


def numbers(out: Path) -> dict:
    """summary.json without its wall time."""
    summary = json.loads((out / "summary.json").read_text())
    return {k: v for k, v in summary.items() if k != "wall_s"}


class FinishedFirst(AssertionError):
    """The run wrote its summary before the moment to interrupt it."""


def interrupt_when(
    data_dir: Path, out: Path, reached: Callable[[subprocess.Popen], bool], delay: float
) -> tuple[float, str]:
    """Start the run in ``out``, send SIGINT to its group ``delay`` s after ``reached(the
    process)`` holds; (seconds from SIGINT to exit, stderr). Fails if the run ends first, does
    not exit with 130 and the interrupted line, or lives 10 s after SIGINT."""
    proc = start(data_dir, out)
    deadline = time.monotonic() + 300
    while not reached(proc):
        assert proc.poll() is None, f"the run ended before the point: {proc.communicate()}"
        assert time.monotonic() < deadline, "the run never reached the point"
        time.sleep(0.01)
    time.sleep(delay)
    if (out / "summary.json").exists():
        proc.communicate()
        raise FinishedFirst(f"the run finished before it was interrupted ({delay:.2f} s)")
    os.killpg(proc.pid, signal.SIGINT)
    sent = time.monotonic()
    try:
        _, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"still running 10 s after SIGINT: {proc.communicate()[1][-2000:]}")
    took = time.monotonic() - sent
    lines = [line for line in err.splitlines() if line.strip()]
    assert proc.returncode == 130, err
    assert lines[-1] == INTERRUPTED, err
    assert "Traceback" not in err, err
    # its TFF worker got the same SIGINT; on a loaded machine it may need a moment to exit
    grace = time.monotonic() + 5.0
    while group_alive(proc.pid) and time.monotonic() < grace:
        time.sleep(0.1)
    assert group_alive(proc.pid) == [], "a process of the run (a TFF worker) outlived it by 5 s"
    return took, err


def group_alive(pgid: int) -> list[str]:
    """The process ids of the process group ``pgid`` still running."""
    found = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True).stdout
    return found.split()


def worker_started(proc: subprocess.Popen) -> bool:
    """The run has started its TFF worker (a second process in its group): it is past its
    imports, inside the command line's handling of Ctrl-C."""
    return len(group_alive(proc.pid)) > 1


@pytest.fixture
def sigint_handler():
    """The SIGINT handler and the interrupt record as they were, after the test."""
    from fedprune.engine import interrupts

    previous = signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGINT, previous)
    interrupts._received.clear()


def _in_fast_path(monkeypatch, action: Callable[[], None], nth: int = 1) -> list[int]:
    """Run ``action`` inside the ``nth`` Python call that TensorFlow's C++ eager fast path
    makes while it creates a dataset iterator (``TensorShape.__len__`` for the attribute
    ``output_shapes`` of ``AnonymousIteratorV3``, once per Keras epoch); returns the count."""
    from tensorflow.python.framework import tensor_shape

    original = tensor_shape.TensorShape.__len__
    calls = [0]

    def length(self: object) -> int:
        if sys._getframe(1).f_code.co_name == "anonymous_iterator_v3":
            calls[0] += 1
            if calls[0] == nth:
                action()
        return original(self)

    monkeypatch.setattr(tensor_shape.TensorShape, "__len__", length)
    return calls


def test_tensorflow_drops_an_interrupt_raised_in_its_eager_fast_path(monkeypatch):
    """Why FedCRef's local training defers Ctrl-C: TF 2.14 drops this KeyboardInterrupt."""
    import numpy as np
    import tensorflow as tf

    def interrupt() -> None:
        raise KeyboardInterrupt

    calls = _in_fast_path(monkeypatch, interrupt)
    dataset = tf.data.Dataset.from_tensor_slices(np.zeros((4, 2), np.float32)).batch(2)
    iter(dataset)  # no KeyboardInterrupt
    assert calls[0] >= 1


def test_ctrl_c_in_local_training_ends_it_after_the_epoch(monkeypatch, sigint_handler):
    import numpy as np

    from fedprune.algorithms.fedcref.local_models import LocalTrainer
    from fedprune.engine import interrupts

    interrupts.install()
    trainer = LocalTrainer(784, epochs=5, batch_size=8)
    x = np.random.default_rng(0).random((16, 784)).astype(np.float32)
    trainer.fit(x, seed=1)  # traced, so that the fits below take the same path
    whole = _in_fast_path(monkeypatch, lambda: None, nth=0)
    trainer.fit(x, seed=1)
    assert whole[0] >= 5  # at least one per epoch
    calls = _in_fast_path(monkeypatch, lambda: os.kill(os.getpid(), signal.SIGINT), nth=1)
    with pytest.raises(KeyboardInterrupt):
        trainer.fit(x, seed=1)
    assert calls[0] <= 2 * whole[0] // 5  # it ended after epoch 1 (of 5)
    assert interrupts.received()
    assert signal.getsignal(signal.SIGINT) is interrupts._on_sigint  # restored


def test_deferred_without_a_command_raises_at_its_end_and_forgets(sigint_handler):
    from fedprune.engine import interrupts

    signal.signal(signal.SIGINT, signal.default_int_handler)  # library use: no install()
    with pytest.raises(KeyboardInterrupt), interrupts.deferred():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)  # the handler runs here, and only notes it
        done = True
    assert done
    assert not interrupts.received()  # a later computation starts afresh
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.slow
def test_sigint_at_every_stage_ends_within_2_s_and_the_resumed_run_is_the_same(tmp_path):
    data_dir = write_data(tmp_path / "data")
    straight = start(data_dir, tmp_path / "straight")  # the uninterrupted run, alongside
    out = tmp_path / "run"
    points = [
        ("system built", lambda _p: (out / "config.json").exists(), 0.0),
        ("iteration 1", lambda _p: (out / "config.json").exists(), random.uniform(0.5, 6.0)),
        ("iteration 2", lambda _p: metrics_rows(out) >= 1, 0.0),
    ]
    for name, reached, delay in points:
        assert metrics_rows(out) == 0, f"{name}: iteration 1 ended before the point before"
        took, err = interrupt_when(data_dir, out, reached, delay)
        where = f"{name} (+{delay:.2f} s)"
        assert took < EXIT_WITHIN_S, f"{where}: exit {took:.2f} s after SIGINT\n{err}"
    assert metrics_rows(out) == 1  # iteration 2 was interrupted; iteration 1 is kept

    resumed = start(data_dir, out)
    _, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err
    _, err = straight.communicate(timeout=600)
    assert straight.returncode == 0, err
    assert numbers(out) == numbers(tmp_path / "straight")
    assert metrics_rows(out) == metrics_rows(tmp_path / "straight") == 2
    # the TensorBoard files: the same tags and steps as the uninterrupted run, each step once
    resumed_tags, straight_tags = read_tags(out), read_tags(tmp_path / "straight")
    assert resumed_tags == straight_tags and resumed_tags


def measure(runs: int, seed: int = 0) -> None:
    """SIGINT at a random moment (uniform over a run's life, from its TFF worker's start to
    its summary) of ``runs`` fresh runs; each is resumed and compared with an uninterrupted
    run. Prints one line per run and the totals."""
    root = Path(tempfile.mkdtemp(prefix="fedcref-interrupts-"))
    data_dir = write_data(root / "data")
    straight = start(data_dir, root / "straight")
    while not worker_started(straight):
        assert straight.poll() is None, straight.communicate()
        time.sleep(0.01)
    began = time.monotonic()
    while not (root / "straight" / "summary.json").exists():
        assert straight.poll() is None, straight.communicate()
        time.sleep(0.01)
    life = time.monotonic() - began
    _, err = straight.communicate(timeout=600)
    assert straight.returncode == 0, err
    print(f"uninterrupted: {life:.1f} s from the TFF worker's start to the summary", flush=True)
    rng = random.Random(seed)
    times, equal = [], 0
    for k in range(runs):
        out = root / f"run{k}"
        while True:  # a run a little faster than the first may finish first: draw again
            delay = rng.uniform(0.0, life)
            try:
                took, _ = interrupt_when(data_dir, out, worker_started, delay)
                break
            except FinishedFirst:
                print(f"{k}: finished before SIGINT at {delay:.2f} s; drawn again", flush=True)
                shutil.rmtree(out)
        rows = metrics_rows(out)
        resumed = start(data_dir, out)
        _, err = resumed.communicate(timeout=600)
        assert resumed.returncode == 0, err
        same = numbers(out) == numbers(root / "straight")
        times.append(took)
        equal += same
        print(f"{k}: SIGINT {delay:.2f} s after the worker started, rows {rows}, exit after "
              f"{took:.2f} s, resumed run equal: {same}", flush=True)  # fmt: skip
    print(f"{runs} interrupts: exit within {max(times):.2f} s (median "
          f"{sorted(times)[len(times) // 2]:.2f} s); {equal} of {runs} resumed runs equal "
          "the uninterrupted one")  # fmt: skip


if __name__ == "__main__":
    measure(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
