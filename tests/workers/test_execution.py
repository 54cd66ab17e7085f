"""The TFF worker never outlives Python and never holds the caller's pipes."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    import tensorflow_federated as tff
    from fedprune.workers import execution

    targets = execution.install(num_local_workers=int(sys.argv[1]), log_dir=sys.argv[3])

    @tff.federated_computation(tff.FederatedType(np.float32, tff.CLIENTS))
    def mean(x):
        return tff.federated_mean(x)

    print("RESULT", mean([1.0, 2.0, 6.0]), flush=True)
    print("TARGETS", *targets, flush=True)
    print("PIDS", *execution.running_pids(), flush=True)
    if sys.argv[2] == "hang":
        import time
        time.sleep(600)
    """
)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] == "Z"  # exited, waiting to be reaped
    except FileNotFoundError:
        return True


def _pids(output: str) -> list[int]:
    line = next(line for line in output.splitlines() if line.startswith("PIDS"))
    return [int(p) for p in line.split()[1:]]


@pytest.mark.parametrize("workers", [1, 2])
def test_piped_run_returns_and_leaves_no_worker(workers, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(workers), "exit", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=180,  # a leaked worker holding the pipe would hang here: TimeoutExpired
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "RESULT 3.0" in proc.stdout
    pids = _pids(proc.stdout)
    assert workers <= len(pids) <= 2 * workers  # each worker_binary, and its sandbox forwarder
    assert all(_gone(pid) for pid in pids)


def test_worker_dies_when_python_is_killed(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, "1", "hang", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        pids, targets = [], []
        for line in proc.stdout:
            if line.startswith("TARGETS"):
                targets = line.split()[1:]
            if line.startswith("PIDS"):
                pids = _pids(line)
                break
        assert pids
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        deadline = time.monotonic() + 10
        while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert all(_gone(p) for p in pids)
        assert proc.stdout.read() == ""  # EOF: nothing else holds the pipe
        # a sandboxed worker's private socket directory goes with it
        sockets = [Path(t.removeprefix("unix:")) for t in targets if t.startswith("unix:")]
        deadline = time.monotonic() + 5
        while any(s.parent.exists() for s in sockets) and time.monotonic() < deadline:
            time.sleep(0.05)
        log = (tmp_path / "worker-0.log").read_text(errors="replace")[-2000:]
        assert not any(s.parent.exists() for s in sockets), f"forwarder's log:\n{log}"
    finally:
        proc.kill()


KILLED_MID_CALL = textwrap.dedent(
    """
    import os, signal, sys, threading
    import numpy as np
    import tensorflow as tf
    import tensorflow_federated as tff
    from fedprune.engine import rounds
    from fedprune.workers import execution

    execution.install(num_local_workers=1)

    @tff.tensorflow.computation(np.int64)
    def spin(n):
        body = lambda i, s: (i + 1, s + i)
        return tf.while_loop(lambda i, s: i < n, body, (tf.constant(0, tf.int64),) * 2)[1]

    print("warm", spin(10), flush=True)
    worker_binary = execution.running_pids()[-1]
    threading.Timer(1.0, os.kill, (worker_binary, signal.SIGKILL)).start()
    try:
        rounds.call_interruptibly(lambda: spin(10**12))
    except execution.WorkerError as err:
        print("ERROR", err, flush=True)
    """
)


def test_a_worker_that_dies_mid_call_ends_the_wait_with_one_error():
    """Without the liveness check the call waits forever on the dead worker."""
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_MID_CALL], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("ERROR"))
    assert "TFF worker 0" in line and "run the same command again to resume" in line
    assert "worker-0.log" in line or ".log" in line


LEAK_CHECK = textwrap.dedent(
    """
    import json, os, sys, threading
    import numpy as np
    import tensorflow_federated as tff
    from fedprune.workers import execution

    @tff.federated_computation(tff.FederatedType(np.float32, tff.CLIENTS))
    def mean(x):
        return tff.federated_mean(x)

    counts = []
    for workers in (1, 2, 1, 2, 1, 2):  # the sync and the mergeable context
        execution.install(num_local_workers=workers, log_dir=sys.argv[1])
        assert mean([1.0, 2.0, 6.0]) == 3.0
        execution.shutdown()
        counts.append((len(os.listdir("/proc/self/fd")), threading.active_count()))
    print("COUNTS", json.dumps(counts), flush=True)
    """
)


def test_install_and_shutdown_leave_no_descriptor(tmp_path):
    """A process that runs many commands (reproduce/shared_process.py) must not gather
    descriptors or threads: TFF's context left an event loop (epoll, socket pair, thread)
    and gRPC a channel per install, and select() failed after ~300 runs."""
    proc = subprocess.run(
        [sys.executable, "-c", LEAK_CHECK, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("COUNTS"))
    counts = json.loads(line.removeprefix("COUNTS "))  # [descriptors, threads] per install
    # after the first of each kind, every install/shutdown ends where the previous one did
    assert counts[2:] == [counts[0], counts[1]] * 2, counts


@pytest.mark.parametrize("with_fedprune", [False, True])
def test_a_pytest_session_importing_tff_through_fedprune_ends_without_a_traceback(
    with_fedprune, tmp_path
):
    # Control (False): in a pytest session that imported TFF alone, TFF's import-time context
    # is collected during interpreter teardown and its __del__ prints a traceback (as `make
    # test` did after its last test). fedprune releases that context at exit, while the
    # interpreter is whole.
    imports = ("import fedprune\n" if with_fedprune else "") + "import tensorflow_federated\n"
    (tmp_path / "test_child.py").write_text(imports + "\n\ndef test_nothing():\n    pass\n")
    root = str(Path(__file__).resolve().parents[2])
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_child.py"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": root},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout[-2000:]
    output = proc.stdout + proc.stderr
    printed = "Exception ignored in" in output and "ServiceManager.__del__" in output
    assert printed is not with_fedprune, output[-2000:]
