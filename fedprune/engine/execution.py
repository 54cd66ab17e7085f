"""The one place that owns TFF execution: worker processes and the execution context.

TFF's default local context starts a C++ ``worker_binary`` lazily, lets it inherit the
caller's stdout/stderr, and only stops it from a ``__del__`` that may never run: in a
pipeline (``| tee``, CI) the orphaned worker keeps the pipe open and the command never ends.
Here every worker

* is started eagerly, from the main thread, by :func:`install`;
* writes its output to a log file (never to the caller's stdout/stderr);
* gets ``PR_SET_PDEATHSIG = SIGKILL``, so the kernel kills it if Python dies for any reason;
* is stopped (SIGTERM, then SIGKILL) at interpreter exit and by :func:`shutdown`.

Several workers (``num_local_workers > 1``, or ``remote_workers`` as ``host:port`` of
``worker_binary`` processes started elsewhere) are driven by TFF's mergeable-computation
context, which splits the clients of a round across them and merges the aggregates.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import grpc
import portpicker
import tensorflow_federated as tff

_GRPC_OPTIONS = [
    ("grpc.max_message_length", 2_000_000_000),
    ("grpc.max_receive_message_length", 2_000_000_000),
    ("grpc.max_send_message_length", 2_000_000_000),
]
_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)
_lock = threading.Lock()
_workers: list[Worker] = []


def worker_binary_path() -> Path:
    """The C++ worker shipped inside the tensorflow-federated wheel."""
    path = Path(tff.__file__).parent / "data" / "worker_binary"
    if not path.is_file():
        raise RuntimeError(f"TFF worker binary not found at {path}; reinstall tensorflow-federated")
    return path


def _die_with_parent() -> None:  # runs in the child between fork and exec
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class Worker:
    """One local ``worker_binary`` process serving TFF's executor service on a port."""

    def __init__(self, log_path: Path, max_concurrent_calls: int = -1):
        self.port = portpicker.pick_unused_port()
        self.log_path = log_path
        self._log = open(log_path, "ab")
        self.process = subprocess.Popen(
            [
                str(worker_binary_path()),
                f"--port={self.port}",
                f"--max_concurrent_computation_calls={max_concurrent_calls}",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            close_fds=True,
            preexec_fn=_die_with_parent,
        )

    @property
    def target(self) -> str:
        return f"localhost:{self.port}"

    def stop(self, timeout: float = 5.0) -> None:
        """Terminate the process and wait for it; idempotent."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


def _wait_ready(stub: tff.framework.RemoteExecutorGrpcStub, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not stub.is_ready:
        if time.monotonic() > deadline:
            raise RuntimeError(f"TFF worker at {what} did not become ready in {timeout:.0f}s")
        time.sleep(0.05)


def _executor_factory(target: str, timeout: float) -> tff.framework.ExecutorFactory:
    channel = grpc.insecure_channel(target, _GRPC_OPTIONS)
    stub = tff.framework.RemoteExecutorGrpcStub(channel)
    _wait_ready(stub, target, timeout)

    def stack_fn(cardinalities: dict) -> tff.framework.RemoteExecutor:
        cardinalities.setdefault(tff.CLIENTS, 0)
        executor = tff.framework.RemoteExecutor(stub)
        executor.set_cardinalities(cardinalities)
        return executor

    return tff.framework.ResourceManagingExecutorFactory(executor_stack_fn=stack_fn)


def _context_kwargs() -> dict:
    return dict(
        compiler_fn=tff.backends.native.desugar_and_transform_to_native,
        transform_args=tff.tensorflow.transform_args,
        transform_result=tff.tensorflow.transform_result,
    )


def install(
    num_local_workers: int = 1,
    remote_workers: tuple[str, ...] = (),
    log_dir: str | os.PathLike | None = None,
    ready_timeout: float = 60.0,
) -> list[str]:
    """Start workers and make them TFF's default execution context; returns their targets.

    Calling it again replaces the previous workers. Logs go to ``log_dir`` (default: a
    temporary directory) as ``worker-<i>.log``.
    """
    if num_local_workers < 0 or (num_local_workers == 0 and not remote_workers):
        raise ValueError("need at least one local or remote TFF worker")
    with _lock:
        _stop_all()
        log_root = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="fedprune-tff-"))
        log_root.mkdir(parents=True, exist_ok=True)
        for i in range(num_local_workers):
            _workers.append(Worker(log_root / f"worker-{i}.log"))
        targets = [w.target for w in _workers] + list(remote_workers)
        factories = [_executor_factory(t, ready_timeout) for t in targets]
        if len(factories) == 1:
            context = tff.framework.SyncExecutionContext(
                executor_fn=factories[0], **_context_kwargs()
            )
        else:
            async_contexts = [
                tff.framework.AsyncExecutionContext(executor_fn=f, **_context_kwargs())
                for f in factories
            ]
            context = tff.backends.native.create_mergeable_comp_execution_context(async_contexts)
        tff.framework.set_default_context(context)
        return targets


def _stop_all() -> None:
    while _workers:
        _workers.pop().stop()


def shutdown() -> None:
    """Stop every worker this process started (also runs at interpreter exit)."""
    with _lock:
        _stop_all()


def running_pids() -> list[int]:
    """Process ids of this process's live workers."""
    return [w.process.pid for w in _workers if w.process.poll() is None]


atexit.register(shutdown)
