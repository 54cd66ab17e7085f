"""The one place that owns TFF execution: worker processes and the execution context.

TFF's default local context starts a C++ ``worker_binary`` lazily, lets it inherit the
caller's stdout/stderr, and only stops it from a ``__del__`` that may never run: in a
pipeline (``| tee``, CI) the orphaned worker keeps the pipe open and the command never ends.
And ``worker_binary`` listens on every interface with neither authentication nor encryption:
whoever reaches its port runs TensorFlow graphs as the user. Here every local worker

* is started eagerly, from the main thread, by :func:`install`;
* runs in a private user + network namespace and is reached through a Unix socket only this
  user can open (:mod:`fedprune.workers.local`). Where that sandbox cannot be made,
  :func:`install` refuses with :class:`WorkerError` before anything starts, naming the cause
  and the ways out; with ``unsafe_open_workers`` it runs the plain worker instead, listening on
  loopback only (an ``LD_PRELOAD`` ``bind()`` interposer, which needs a C compiler), without
  authentication: any local user can reach it. One ``fedprune: note:`` line says so;
* writes its output to a log file (never to the caller's stdout/stderr);
* dies with Python (``PR_SET_PDEATHSIG``), and is stopped at interpreter exit and by
  :func:`shutdown`.

Remote workers (``remote_workers`` as ``HOST:PORT``) are ``fedprune worker`` processes on
other hosts (:mod:`fedprune.workers.remote`), reached with mutual TLS (:class:`RemoteTLS`).
A plain-text remote target is refused unless ``insecure_remote`` is set. Each remote worker is
probed first (TCP, TLS and the HTTP/2 answer, bounded by ``remote_timeout``), so an
unreachable or refusing worker fails with one line naming it and the fix.

Several workers (``num_local_workers > 1``, or remote ones) are driven by TFF's
mergeable-computation context, which splits the clients of a round across them and merges the
aggregates.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import ssl
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import tensorflow_federated as tff

from fedprune.checks import check_host_port
from fedprune.errors import ConfigError
from fedprune.workers import channel as worker_channel
from fedprune.workers.local import (
    WorkerError,
    WorkerProcess,
    note_unsafe,
    require_sandbox,
    worker_binary_path,
)

__all__ = [
    "RemoteTLS",
    "RunInProgress",
    "WorkerError",
    "install",
    "one_run",
    "running_pids",
    "shutdown",
    "worker_binary_path",
]

_GRPC_OPTIONS = [
    ("grpc.max_message_length", 2_000_000_000),
    ("grpc.max_receive_message_length", 2_000_000_000),
    ("grpc.max_send_message_length", 2_000_000_000),
]
# An HTTP/2 client connection preface and an empty SETTINGS frame: a TFF worker (gRPC server)
# answers with its own SETTINGS, which proves the whole path up to the worker works.
_H2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_lock = threading.Lock()
_workers: list[WorkerProcess] = []
_channels: list[worker_channel.WorkerChannel] = []  # closed with the workers: each holds sockets
_contexts: list[object] = []  # the execution contexts installed, closed likewise


@dataclass(frozen=True)
class RemoteTLS:
    """Mutual TLS for remote workers: PEM paths of the CA that signed the workers'
    certificates (``--tls-ca``) and of this client's certificate and key (``--tls-cert``,
    ``--tls-key``, signed by the CA the workers were given as ``--client-ca``)."""

    ca: str
    cert: str
    key: str

    @classmethod
    def from_options(cls, ca: str | None, cert: str | None, key: str | None) -> RemoteTLS | None:
        """The command-line options as one value: None if none is given, else all three."""
        given = {"--tls-ca": ca, "--tls-cert": cert, "--tls-key": key}
        if not any(given.values()):
            return None
        missing = [flag for flag, value in given.items() if not value]
        if missing:
            raise ConfigError(
                f"--tls-ca, --tls-cert and --tls-key go together; also give {', '.join(missing)}"
            )
        return cls(str(ca), str(cert), str(key))

    def _read(self) -> tuple[bytes, bytes, bytes]:
        out = []
        for flag, path in (
            ("--tls-ca", self.ca),
            ("--tls-cert", self.cert),
            ("--tls-key", self.key),
        ):
            try:
                out.append(Path(path).read_bytes())
            except OSError as err:
                raise ConfigError(f"cannot read {flag} {path} ({err.strerror or err})") from None
        return out[0], out[1], out[2]

    def ssl_context(self) -> ssl.SSLContext:
        """A Python TLS client context with the same trust and identity as the gRPC channel."""
        self._read()  # one clear error for a missing file
        ctx = ssl.create_default_context(cafile=self.ca)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            ctx.load_cert_chain(self.cert, self.key)
        except ssl.SSLError as err:
            raise ConfigError(
                f"cannot load --tls-cert {self.cert} with --tls-key {self.key} ({err}); "
                "give a PEM certificate and its matching PEM private key"
            ) from None
        ctx.set_alpn_protocols(["h2"])
        return ctx

    def credentials(self) -> grpc.ChannelCredentials:
        """gRPC channel credentials: verify the worker against ``ca``, present ``cert``."""
        ca, cert, key = self._read()
        return grpc.ssl_channel_credentials(
            root_certificates=ca, private_key=key, certificate_chain=cert
        )


def _split_target(target: str) -> tuple[str, int]:
    try:
        return check_host_port(target)
    except ValueError as err:
        raise ConfigError(f"--remote-worker: {err}") from None


def _probe_remote(target: str, tls: RemoteTLS | None, timeout: float) -> None:
    """Connect, handshake and hear the worker's HTTP/2 answer, or raise one clear WorkerError."""
    host, port = _split_target(target)
    start_hint = "is `fedprune worker` running there, and is the port open?"
    silent = WorkerError(f"remote TFF worker {target} did not answer in {timeout:g}s; {start_hint}")
    deadline = time.monotonic() + timeout
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except socket.gaierror as err:
        raise WorkerError(f"remote TFF worker {target}: unknown host ({err.strerror})") from None
    except TimeoutError:
        raise silent from None
    except OSError as err:
        raise WorkerError(
            f"cannot reach remote TFF worker {target} ({err.strerror or err}); {start_hint}"
        ) from None
    try:
        if tls is not None:
            try:
                sock = tls.ssl_context().wrap_socket(sock, server_hostname=host)
            except ssl.SSLCertVerificationError as err:
                raise WorkerError(
                    f"remote TFF worker {target}: its certificate does not verify against "
                    f"--tls-ca {tls.ca} ({err.verify_message}); the worker's --tls-cert must be "
                    f"signed by that CA and name {host}"
                ) from None
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        sock.sendall(_H2_HELLO)
        answer = sock.recv(9)
    except ssl.SSLError as err:
        if tls is not None and "ALERT" in (err.reason or ""):
            raise WorkerError(
                f"remote TFF worker {target} refused our certificate ({err.reason}); "
                f"--tls-cert {tls.cert} must be signed by the worker's --client-ca"
            ) from None
        raise WorkerError(
            f"TLS with remote TFF worker {target} failed ({err.reason or err}); is it a "
            "`fedprune worker` (mutual TLS), and not a plain worker_binary?"
        ) from None
    except TimeoutError:
        raise silent from None
    except OSError as err:
        raise WorkerError(
            f"remote TFF worker {target} closed the connection ({err.strerror or err}); "
            "see its stderr"
        ) from None
    finally:
        sock.close()
    if not answer:
        raise WorkerError(
            f"remote TFF worker {target} closed the connection; "
            + ("see its stderr" if tls is not None else "is it a plain worker_binary?")
        )


def _executor_factory(
    target: str, timeout: float, credentials: grpc.ChannelCredentials | None = None
) -> tff.framework.ExecutorFactory:
    channel = worker_channel.open_channel(target, _GRPC_OPTIONS, credentials)
    _channels.append(channel)
    stub = tff.framework.RemoteExecutorGrpcStub(channel)
    if not worker_channel.connect(channel, timeout):
        raise WorkerError(f"TFF worker at {target} did not become ready in {timeout:g}s")

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


def check_remote(
    remote_workers: tuple[str, ...],
    remote_tls: RemoteTLS | None,
    insecure_remote: bool,
    announce: bool = True,
) -> None:
    """Refuse plain-text remote workers unless ``insecure_remote``; read the TLS files.

    Raises :class:`ConfigError` (one line naming the fix) before any worker or run
    directory is made. ``announce``: print the plain-text warning (once, where the workers
    are installed).
    """
    for target in remote_workers:
        _split_target(target)
    if not remote_workers:
        return
    if remote_tls is None and not insecure_remote:
        raise ConfigError(
            f"remote TFF worker {remote_workers[0]} would be used in plain text; give --tls-ca, "
            "--tls-cert and --tls-key (docs/engine.md 'Remote workers'), or --insecure-remote"
        )
    if remote_tls is None:
        if not announce:
            return
        print(
            f"fedprune: note: remote TFF worker(s) {', '.join(remote_workers)} used in plain text "
            "(--insecure-remote): anyone on the network path can read the models and run "
            "TensorFlow graphs there",
            file=sys.stderr,
            flush=True,
        )
    else:
        remote_tls.ssl_context()  # missing or unreadable files fail before anything starts


def install(
    num_local_workers: int = 1,
    remote_workers: tuple[str, ...] = (),
    log_dir: str | os.PathLike | None = None,
    ready_timeout: float = 60.0,
    remote_tls: RemoteTLS | None = None,
    insecure_remote: bool = False,
    remote_timeout: float = 10.0,
    unsafe_open_workers: bool = False,
) -> list[str]:
    """Start workers and make them TFF's default execution context; returns their targets.

    Calling it again replaces the previous workers. Logs go to ``log_dir`` (default: a
    temporary directory) as ``worker-<i>.log``. Local workers get ``ready_timeout`` seconds to
    start; each remote worker must answer within ``remote_timeout`` seconds, over mutual TLS
    with ``remote_tls`` (plain text only with ``insecure_remote``). Where local workers cannot
    be sandboxed, :class:`WorkerError` before anything starts, unless ``unsafe_open_workers``
    (then they listen on loopback without authentication; one note line says so).
    """
    if num_local_workers < 0 or (num_local_workers == 0 and not remote_workers):
        raise ValueError("need at least one local or remote TFF worker")
    remote_workers = tuple(remote_workers)
    check_remote(remote_workers, remote_tls, insecure_remote)
    if num_local_workers and not require_sandbox(unsafe_open_workers):
        note_unsafe()
    with _lock:
        _stop_all()
        try:
            return _install(
                num_local_workers, remote_workers, log_dir, ready_timeout, remote_tls,
                remote_timeout, unsafe_open_workers,
            )  # fmt: skip
        except BaseException:
            _stop_all()
            raise


def _install(
    num_local_workers: int,
    remote_workers: tuple[str, ...],
    log_dir: str | os.PathLike | None,
    ready_timeout: float,
    remote_tls: RemoteTLS | None,
    remote_timeout: float,
    unsafe_open_workers: bool,
) -> list[str]:
    log_root = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="fedprune-tff-"))
    log_root.mkdir(parents=True, exist_ok=True)
    for i in range(num_local_workers):
        _workers.append(
            WorkerProcess(
                log_root / f"worker-{i}.log",
                unsafe_open=unsafe_open_workers,
                start_timeout=ready_timeout,
            )
        )
    factories = [_executor_factory(w.target, ready_timeout) for w in _workers]
    credentials = remote_tls.credentials() if remote_tls is not None else None
    for target in remote_workers:
        _probe_remote(target, remote_tls, remote_timeout)
        factories.append(_executor_factory(target, remote_timeout, credentials))
    if len(factories) == 1:
        context = tff.framework.SyncExecutionContext(executor_fn=factories[0], **_context_kwargs())
    else:
        async_contexts = [
            tff.framework.AsyncExecutionContext(executor_fn=f, **_context_kwargs())
            for f in factories
        ]
        context = tff.backends.native.create_mergeable_comp_execution_context(async_contexts)
    _contexts.append(context)
    tff.framework.set_default_context(context)
    return [w.target for w in _workers] + list(remote_workers)


def _close_event_loop(context: object) -> None:
    """End the event-loop thread of a TFF execution context and close its loop.

    TFF 0.87's ``AsyncThreadRunner`` (held by the sync and the mergeable contexts) runs its
    loop in a daemon thread whose target keeps the runner alive, so its ``__del__`` (which
    stops the loop but never closes it) never runs: every ``install`` left a thread, an
    epoll descriptor and a socket pair behind. A process that runs many commands
    (``fedprune/reproduce/shared_process.py``) ran out of descriptors after ~300 runs
    (``select()`` refuses those >= 1024). Private attributes of the pinned TFF; the test
    ``tests/workers/test_execution.py::test_install_and_shutdown_leave_no_descriptor``
    fails loudly if they change."""
    runner = getattr(context, "_async_runner", None)
    loop = getattr(runner, "_event_loop", None)
    thread = getattr(runner, "_thread", None)
    if loop is None or thread is None or loop.is_closed():
        return
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5.0)
    if not thread.is_alive():
        loop.close()
        runner._finalizer = lambda loop, thread: None  # its __del__ would use the closed loop


def _stop_all() -> None:
    """Stop the local workers, close the gRPC channels and the contexts' event loops (see
    :func:`_close_event_loop`)."""
    while _contexts:
        _close_event_loop(_contexts.pop())
    while _channels:
        _channels.pop().close()
    while _workers:
        _workers.pop().stop()


def installed() -> bool:
    """Whether :func:`install` has made TFF's default context one of fedprune's (and no
    :func:`shutdown` has ended it): without it TFF's own import-time context would start an
    unsandboxed ``worker_binary`` on the first computation."""
    with _lock:
        return bool(_contexts)


def shutdown() -> None:
    """Stop every worker this process started (also runs at interpreter exit)."""
    with _lock:
        _stop_all()


def release_default_context() -> None:
    """Stop this process's workers and drop TFF's default context.

    Importing TFF installs a local C++ context whose ``ServiceManager.__del__`` uses the
    ``subprocess`` module. Collected during interpreter teardown, after module globals are
    cleared, it prints "Exception ignored in ... ServiceManager.__del__ ... AttributeError:
    'NoneType' object has no attribute 'Popen'". fedprune calls this at exit (an ``atexit``
    handler of :mod:`fedprune`), while the interpreter is whole; afterwards TFF computations
    in this process have no context until :func:`install`."""
    import tensorflow_federated as tff
    from tensorflow_federated.python.core.impl.context_stack import runtime_error_context

    shutdown()
    tff.framework.set_default_context(runtime_error_context.RuntimeErrorContext())


def check_workers() -> None:
    """Raise if a local worker of this process has ended while it was in use: a TFF call to
    it would otherwise wait forever.

    ``KeyboardInterrupt`` if SIGINT ended it (Ctrl-C went to the whole process group, and
    the interrupt itself may have been lost in the main thread, see
    :mod:`fedprune.engine.interrupts`); else :class:`WorkerError` naming its log."""
    for i, worker in enumerate(list(_workers)):
        how = worker.ended()
        if how == "interrupt":
            raise KeyboardInterrupt
        if how is not None:
            raise WorkerError(
                f"TFF worker {i} {how} during a computation (see {worker.log_path}); "
                "run the same command again to resume"
            )


def running_pids() -> list[int]:
    """Process ids of this process's live worker processes: each ``worker_binary`` and, when
    sandboxed, the forwarder in front of it (listed first)."""
    return [pid for w in _workers for pid in w.pids()]


class RunInProgress(ConfigError):
    """Another run of this process holds TFF's execution (:func:`one_run`); the message names
    its run directory and thread."""


_run_lock = threading.Lock()
_running: dict[str, object] = {}  # the run holding _run_lock: its "out", "thread", "since"


@contextlib.contextmanager
def one_run(out: str | os.PathLike) -> Iterator[None]:
    """The block as this process's only run (``out``: its run directory, for the message).

    TFF's default execution context is process-wide (:func:`install` replaces it, and
    :func:`shutdown` stops its workers): two runs in two threads of one process would start,
    use and stop each other's workers, and both die inside TFF ("Event loop is closed").
    So a second run while one is running is refused at once with :class:`RunInProgress`
    naming the first, before anything of it is made; runs one after another, or in
    separate processes, are fine. The runs' own threads (the concurrent per-cluster rounds,
    :mod:`fedprune.engine.rounds`) run inside the block and are not runs."""
    if not _run_lock.acquire(blocking=False):
        holder = dict(_running)
        raise RunInProgress(
            f"{out}: this process is already training {holder.get('out')} (thread "
            f"{holder.get('thread')!r}, since {holder.get('since')}); TFF's execution context "
            "is one per process: run the second after it ends, or in another process"
        )
    try:
        _running.update(
            out=os.fspath(out),
            thread=threading.current_thread().name,
            since=time.strftime("%H:%M:%S"),
        )
        yield
    finally:
        _running.clear()
        _run_lock.release()


atexit.register(shutdown)
