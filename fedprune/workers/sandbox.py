"""Run a TFF ``worker_binary`` that only this user can reach: a private network namespace.

``worker_binary`` serves TFF's executor service on ``--port`` on every interface, without
authentication or encryption: whoever reaches the port can run TensorFlow graphs as the user.
fedprune (:mod:`fedprune.workers.local`) therefore starts it through this program::

    unshare --user --map-root-user --net python -m fedprune.workers.sandbox \\
        --socket DIR/worker.sock --parent-pid PID -- WORKER_BINARY [FLAGS...]

``unshare`` gives this process a new user and network namespace in which the only interface is
a loopback of its own (brought up here). The worker, started as this program's child on a free
port of that loopback, is therefore reachable from nowhere else on the host or the network.
This program accepts connections on a Unix socket (mode 0600, in the 0700 directory DIR that
the parent created) and forwards their bytes to the worker's port. A Unix socket is a
filesystem object, visible across network namespaces: the parent reaches the worker with the
gRPC target ``unix:DIR/worker.sock``, and file permissions let nobody else (but root) do so.

Lifetime: the program exits, stopping the worker and removing the socket and (if empty) DIR,
on SIGTERM, when its parent dies (``PR_SET_PDEATHSIG``, set here, with a check that
``--parent-pid`` is still the parent), or when the worker exits. The worker gets
``PR_SET_PDEATHSIG = SIGKILL`` towards this process, so even a ``kill -9`` of this program takes
the worker with it. Once the Unix socket forwards to a listening worker, ``ready <worker pid>``
is written to stdout, which is then closed.

Standard library only: it starts in a fraction of a second. Bytes are copied by two threads per
connection (blocking ``recv_into``/``sendall``, 1 MiB chunks); the README gives the overhead.
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

_PR_SET_PDEATHSIG = 1
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
_CHUNK = 1 << 20
_LIBC = ctypes.CDLL(None, use_errno=True)


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent dies (Linux prctl)."""
    if _LIBC.prctl(_PR_SET_PDEATHSIG, int(sig)) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")


def loopback_up() -> None:
    """Bring up ``lo`` of the current network namespace (a new one starts with it down).

    Uses the SIOCGIFFLAGS/SIOCSIFFLAGS ioctls so that no ``ip`` binary is needed; allowed
    because ``unshare --map-root-user`` gives this process CAP_NET_ADMIN in its namespace.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(s, _SIOCGIFFLAGS, request))[1]
        if not flags & _IFF_UP:
            fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | _IFF_UP))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy ``src`` to ``dst`` until EOF, then half-close ``dst``; any error ends both ways."""
    buf = bytearray(_CHUNK)
    view = memoryview(buf)
    try:
        while True:
            n = src.recv_into(buf)
            if not n:
                dst.shutdown(socket.SHUT_WR)
                return
            dst.sendall(view[:n])
    except OSError:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def bridge(a: socket.socket, b: socket.socket) -> None:
    """Forward bytes both ways between two connected blocking sockets, in two daemon threads.

    Both sockets are closed once both directions have ended. Returns immediately.
    """

    def forward() -> None:
        _pump(a, b)

    def backward() -> None:
        _pump(b, a)
        there.join()
        a.close()
        b.close()

    there = threading.Thread(target=forward, daemon=True)
    there.start()
    threading.Thread(target=backward, daemon=True).start()


def _wait_listening(
    port: int, worker: subprocess.Popen, timeout: float, stop: _StopSignals
) -> None:
    deadline = time.monotonic() + timeout
    while not stop:
        if worker.poll() is not None:
            raise RuntimeError(f"worker_binary exited with status {worker.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"worker_binary did not listen in {timeout:.0f}s") from None
            time.sleep(0.02)


def _unix_server(path: str) -> socket.socket:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # created 0600: no window in which others could connect
    try:
        server.bind(path)
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    server.listen(64)
    server.settimeout(0.5)  # wake up to notice a dead worker
    return server


class _StopSignals:
    """Records SIGTERM/SIGINT instead of raising from the handler.

    An exception raised by a signal handler can land anywhere, including the first line of
    the ``finally`` that removes the socket (seen once in CI: a parent killed with -9 left its
    socket directory behind). Recording the signal and letting the loops poll it keeps the
    clean-up out of reach of the signal; the loops wake at least every 0.5 s.
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._record)

    def _record(self, signum: int, frame: object) -> None:
        if self.signum is None:
            self.signum = signum

    def __bool__(self) -> bool:
        return self.signum is not None


def _stop_worker(worker: subprocess.Popen) -> None:
    if worker.poll() is None:
        worker.terminate()
        try:
            worker.wait(3.0)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


def serve(socket_path: str, parent_pid: int, command: Sequence[str], timeout: float) -> int:
    """Start the worker on the namespace loopback and forward ``socket_path`` to it.

    Returns 128 + the signal that stopped it (the shell's convention, read by
    ``WorkerProcess.ended()``), or 1 if the worker could not start or exited."""
    stop = _StopSignals()
    die_with_parent(signal.SIGTERM)
    if parent_pid and os.getppid() != parent_pid:  # the parent died before prctl
        return 1
    worker = server = None
    try:
        loopback_up()
        port = _free_port()
        worker = subprocess.Popen(
            [*command, f"--port={port}"],
            stdin=subprocess.DEVNULL,
            stdout=sys.stderr.fileno(),
            stderr=subprocess.STDOUT,
            close_fds=True,
            preexec_fn=die_with_parent,
        )
        _wait_listening(port, worker, timeout, stop)
        if stop:
            return 128 + stop.signum
        server = _unix_server(socket_path)
        os.write(1, f"ready {worker.pid}\n".encode())
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)  # the parent stops reading; nothing else may go there
        os.close(devnull)
        while worker.poll() is None and not stop:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            conn.settimeout(None)
            try:
                upstream = socket.create_connection(("127.0.0.1", port))
            except OSError:
                conn.close()
                continue
            upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            bridge(conn, upstream)
        if stop:
            return 128 + stop.signum
        print(f"worker_sandbox: worker_binary exited ({worker.returncode})", file=sys.stderr)
        return 1
    except (RuntimeError, OSError) as err:
        if stop:
            return 128 + stop.signum
        print(f"worker_sandbox: {err}", file=sys.stderr)
        return 1
    finally:
        if worker is not None:
            _stop_worker(worker)
        if server is not None:
            server.close()
        # The socket and its private directory (the parent's stop() removes them too, but
        # after a kill -9 of the parent only this process is left to do it).
        for remove, path in ((os.unlink, socket_path), (os.rmdir, os.path.dirname(socket_path))):
            try:
                remove(path)
            except OSError:
                pass


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``--socket PATH --parent-pid PID [--timeout S] -- WORKER_BINARY [FLAGS]``."""
    parser = argparse.ArgumentParser(prog="python -m fedprune.workers.sandbox")
    parser.add_argument("--socket", required=True, help="Unix socket to create (mode 0600)")
    parser.add_argument("--parent-pid", type=int, default=0, help="exit if not our parent")
    parser.add_argument("--timeout", type=float, default=60.0, help="worker start limit (60)")
    parser.add_argument("command", nargs="+", help="worker_binary and its flags, after --")
    args = parser.parse_args(argv)
    return serve(args.socket, args.parent_pid, args.command, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
