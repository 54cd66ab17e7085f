"""One local TFF ``worker_binary`` process: sandboxed where the kernel allows, owned either way.

A plain ``worker_binary --port=P`` serves TFF's executor service on every interface of the
host, without authentication: anyone who can reach the port can run TensorFlow graphs as the
user. :class:`WorkerProcess` therefore starts it inside a new user + network namespace
(``unshare --user --map-root-user --net``) through :mod:`fedprune.engine.worker_sandbox`, which
forwards a Unix socket (mode 0600, in a private 0700 directory) to the worker's port on the
namespace's own loopback; the gRPC target is ``unix:<dir>/worker.sock``.

Where unprivileged user namespaces are unavailable (checked once per process with
``unshare -U -r -n true``), the plain worker is started and one ``fedprune: note:`` line on
stderr says that its port is reachable from the network, and why.

Either way the process writes to a log file (never the caller's stdout/stderr), gets
``PR_SET_PDEATHSIG`` so the kernel stops it if Python dies, and is stopped by :meth:`stop`.
Standard library only: ``fedprune worker`` uses it without importing TensorFlow.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fedprune.engine.worker_sandbox import die_with_parent
from fedprune.errors import FedpruneError

_noted = False


class WorkerError(FedpruneError):
    """A TFF worker could not be started or reached; the message names it and the fix."""


def worker_binary_path() -> Path:
    """The C++ worker shipped inside the tensorflow-federated wheel (found without importing)."""
    spec = importlib.util.find_spec("tensorflow_federated")
    if spec is None or spec.origin is None:
        raise WorkerError("tensorflow-federated is not installed; run `make install`")
    path = Path(spec.origin).parent / "data" / "worker_binary"
    if not path.is_file():
        raise WorkerError(f"TFF worker binary not found at {path}; reinstall tensorflow-federated")
    return path


@functools.cache
def sandbox_unavailable_reason() -> str | None:
    """Why workers cannot run in a private network namespace here, or None if they can."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return "the `unshare` command (util-linux) is not installed"
    try:
        probe = subprocess.run(
            [unshare, "-U", "-r", "-n", "true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"`unshare -U -r -n true` failed ({err})"
    if probe.returncode != 0:
        detail = (probe.stderr.strip().splitlines() or [f"status {probe.returncode}"])[-1]
        return f"unprivileged user namespaces are unavailable (`unshare -U -r -n true`: {detail})"
    return None


def _note_unsandboxed(reason: str) -> None:
    global _noted
    if not _noted:
        _noted = True
        print(
            "fedprune: note: local TFF workers listen on a port reachable from the network on "
            f"this machine, because {reason}; see README 'Remote workers'",
            file=sys.stderr,
            flush=True,
        )


def _private_dir() -> Path:
    """A new 0700 directory with a path short enough for a Unix socket (108 bytes)."""
    root = tempfile.gettempdir()
    if len(root) > 60:
        root = "/tmp"
    return Path(tempfile.mkdtemp(prefix="fedprune-worker-", dir=root))


def _readable(fd: int, timeout: float) -> bool:
    """Whether ``fd`` has data (or end of file) within ``timeout`` seconds."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout * 1000.0))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


class WorkerProcess:
    """A local ``worker_binary`` and, when sandboxed, its forwarder; see the module docstring.

    ``target`` is the gRPC target (``unix:...`` sandboxed, ``localhost:PORT`` otherwise).
    ``sandbox=None`` sandboxes when possible and notes the fallback; ``True`` requires it.
    """

    def __init__(
        self,
        log_path: Path,
        max_concurrent_calls: int = -1,
        sandbox: bool | None = None,
        start_timeout: float = 60.0,
    ):
        self.log_path = Path(log_path)
        self._dir: Path | None = None
        self._worker_pid: int | None = None
        reason = None if sandbox is False else sandbox_unavailable_reason()
        if reason is not None and sandbox:
            raise WorkerError(
                f"cannot sandbox the TFF worker: {reason}; allow unprivileged user namespaces "
                "(README 'Remote workers' lists the sysctls)"
            )
        worker = [
            str(worker_binary_path()),
            f"--max_concurrent_computation_calls={max_concurrent_calls}",
        ]
        self._log = open(self.log_path, "ab")
        if sandbox is False:
            self._start_plain(worker)
        elif reason is None:
            self._start_sandboxed(worker, start_timeout)
        else:
            _note_unsandboxed(reason)
            self._start_plain(worker)

    def _start_plain(self, worker: list[str]) -> None:
        with socket.socket() as s:  # a free port; worker_binary binds all interfaces
            s.bind(("", 0))
            port = s.getsockname()[1]
        self.target = f"localhost:{port}"
        self.sandboxed = False
        self.process = subprocess.Popen(
            [*worker, f"--port={port}"],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            close_fds=True,
            preexec_fn=die_with_parent,
        )
        self._worker_pid = self.process.pid

    def _start_sandboxed(self, worker: list[str], timeout: float) -> None:
        self._dir = _private_dir()
        sock = self._dir / "worker.sock"
        self.target = f"unix:{sock}"
        self.sandboxed = True
        try:
            self.process = self._spawn_sandboxed(worker, sock, timeout)
        except OSError as err:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._log.close()
            raise WorkerError(f"cannot start the sandboxed TFF worker ({err})") from None
        try:
            line = self._read_ready_line(timeout + 5.0)
        finally:
            self.process.stdout.close()
        if not line.startswith("ready "):
            self.stop()
            raise WorkerError(
                f"the sandboxed TFF worker did not start ({line or 'no answer'}); "
                f"see {self.log_path}"
            )
        self._worker_pid = int(line.split()[1])

    def _spawn_sandboxed(self, worker: list[str], sock: Path, timeout: float) -> subprocess.Popen:
        package_root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
        return subprocess.Popen(
            [
                *("unshare", "--user", "--map-root-user", "--net"),
                *(sys.executable, "-m", "fedprune.engine.worker_sandbox"),
                *("--socket", str(sock), "--parent-pid", str(os.getpid())),
                *("--timeout", str(timeout), "--", *worker),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log,
            close_fds=True,
            env=env,
            # no preexec_fn: the forwarder sets its own PR_SET_PDEATHSIG and checks that
            # --parent-pid is still its parent; without one, Python spawns without fork()
            # (cheaper, and gRPC's fork handlers stay out of it).
        )

    def _read_ready_line(self, timeout: float) -> str:
        fd = self.process.stdout.fileno()
        data = b""
        deadline = time.monotonic() + timeout
        while b"\n" not in data:
            left = deadline - time.monotonic()
            # poll, not select: select() refuses descriptors >= 1024
            if left <= 0 or not _readable(fd, left):
                return f"timed out after {timeout:.0f}s"
            chunk = os.read(fd, 256)
            if not chunk:
                return f"exited with status {self.process.wait()}"
            data += chunk
        return data.decode(errors="replace").strip()

    def pids(self) -> list[int]:
        """Live processes of this worker: the forwarder (if sandboxed) and ``worker_binary``."""
        pids = [self.process.pid] if self.process.poll() is None else []
        if self._worker_pid not in (None, self.process.pid) and _alive(self._worker_pid):
            pids.append(self._worker_pid)
        return pids

    def ended(self) -> str | None:
        """None while the worker runs; ``"interrupt"`` if SIGINT ended it (Ctrl-C reaches
        the whole process group); else a description of how it exited.

        The process watched is the forwarder when sandboxed (it exits with 128 + the signal
        that stopped it, and as soon as ``worker_binary`` dies), else ``worker_binary``."""
        code = self.process.poll()
        if code is None:
            return None
        if code in (-signal.SIGINT, 128 + signal.SIGINT):
            return "interrupt"
        if code < 0:
            return f"killed by {signal.Signals(-code).name}"
        return f"exited with status {code}"

    def stop(self, timeout: float = 5.0) -> None:
        """Terminate the process tree and wait for it; idempotent.

        SIGTERM makes the forwarder stop the worker; if it has to be killed, the worker's
        ``PR_SET_PDEATHSIG`` kills the worker too.
        """
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._worker_pid is not None and self._worker_pid != self.process.pid:
            deadline = time.monotonic() + timeout
            while _alive(self._worker_pid) and time.monotonic() < deadline:
                time.sleep(0.02)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
        self._log.close()
