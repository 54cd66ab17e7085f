"""One local TFF ``worker_binary`` process: sandboxed where the kernel allows, owned either way.

A plain ``worker_binary --port=P`` serves TFF's executor service on every interface of the
host, without authentication: anyone who can reach the port can run TensorFlow graphs as the
user. :class:`WorkerProcess` therefore starts it inside a new user + network namespace
(``unshare --user --map-root-user --net``) through :mod:`fedprune.workers.sandbox`, which
forwards a Unix socket (mode 0600, in a private 0700 directory) to the worker's port on the
namespace's own loopback; the gRPC target is ``unix:<dir>/worker.sock``.

Where the sandbox cannot be made (``unshare`` from util-linux missing, or unprivileged user
namespaces off; checked once per process with ``unshare -U -r -n true``), no worker starts:
:func:`require_sandbox` raises :class:`WorkerError`, naming the cause and the two ways out
(install util-linux and allow user namespaces, or ``--unsafe-open-workers``). With
``unsafe_open`` (``--unsafe-open-workers``) the plain worker starts instead, kept on loopback:
``worker_binary`` has no address flag, so it runs with ``LD_PRELOAD`` naming a small ``bind()``
interposer (``loopback_bind.c``, compiled once with the system C compiler into a private 0700
cache folder, :func:`loopback_bind_library`) that turns its wildcard bind into ``::1`` or
``127.0.0.1``. Before the worker is used, every socket it listens on is read back from
``/proc`` and must be a loopback one (else it is stopped and :class:`WorkerError` raised); the
gRPC target is ``ipv6:[::1]:PORT`` (or ``ipv4:127.0.0.1:PORT``). That port has no
authentication: any local user can reach it and run TensorFlow graphs as this user.

Either way the process writes to a log file (never the caller's stdout/stderr; opened with
``O_NOFOLLOW``, created 0600), gets ``PR_SET_PDEATHSIG`` so the kernel stops it if Python
dies, and is stopped by :meth:`stop`. Standard library only: ``fedprune worker`` uses it
without importing TensorFlow.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import importlib.util
import ipaddress
import os
import platform
import select
import shlex
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import BinaryIO

from fedprune.errors import FedpruneError
from fedprune.interpreter import PYTHON

UNSAFE_OPTION = "--unsafe-open-workers"
SANDBOX_FIX = (
    "install util-linux (it provides `unshare`) and allow unprivileged user namespaces "
    "(sysctl kernel.unprivileged_userns_clone=1 and user.max_user_namespaces=1000, or on "
    "Ubuntu 24.04 kernel.apparmor_restrict_unprivileged_userns=0)"
)
LOOPBACK_SOURCE = Path(__file__).with_name("loopback_bind.c")
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_ENV_CACHE_DIR = "FEDPRUNE_CACHE_DIR"
# Runs as the plain worker's process before it becomes worker_binary: PR_SET_PDEATHSIG
# (SIGKILL) survives execv, so the worker dies with this Python process. Not a preexec_fn:
# Popen would fork(), and gRPC's fork handlers abort the child (DEVELOPERS.md).
_EXEC_WITH_PARENT = (
    "import ctypes, os, sys\n"
    "if ctypes.CDLL(None).prctl(1, 9) != 0 or os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit(1)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask; the machine's count elsewhere)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover (not Linux)
        return os.cpu_count() or 1


def check_local_workers(count: int) -> int:
    """``count`` local workers, or a :class:`ValueError` saying the most this machine takes.

    Each worker is a TensorFlow process that trains its share of a round's clients on its own
    threads; more of them than usable CPUs only add memory and start-up time, and a large
    number would try to start that many processes."""
    cpus = usable_cpus()
    if count < 1 or count > cpus:
        raise ValueError(
            f"local TFF workers must be between 1 and this machine's {cpus} usable CPU(s), "
            f"got {count}: each worker is a TensorFlow process, so more only adds memory"
        )
    return count


def worker_environment() -> dict[str, str]:
    """The worker's environment: ours, with one TensorFlow intra-op thread per computation
    and one inter-op thread per core, unless ``TF_NUM_INTRAOP_THREADS`` /
    ``TF_NUM_INTEROP_THREADS`` are set.

    TFF runs a round's client computations concurrently. At batch 32 one client's kernels do
    not keep several cores busy, and clients that share every core through TF's intra-op pool
    wait on each other; one client per core does the same work in less time (docs/engine.md
    "Speed": the FedAvg round on 2 cores took 0.8x the time with this setting). It also makes
    a client's arithmetic independent of the machine's core count (TF splits large sums
    across its intra-op threads).
    """
    env = dict(os.environ)
    env.setdefault("TF_NUM_INTRAOP_THREADS", "1")
    env.setdefault("TF_NUM_INTEROP_THREADS", str(usable_cpus()))
    return env


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


def require_sandbox(allow_unsafe: bool = False, offer_unsafe: bool = True) -> bool:
    """Whether local workers will run in their network sandbox; starts nothing.

    True where the sandbox can be made. Where it cannot: False if ``allow_unsafe`` (the
    loopback-only plain worker can then start: its interposer is compiled here, so a missing
    C compiler fails now), else :class:`WorkerError` naming the cause and the ways out
    (``offer_unsafe=False`` leaves ``--unsafe-open-workers`` out, for ``fedprune worker``)."""
    reason = sandbox_unavailable_reason()
    if reason is None:
        return True
    if allow_unsafe:
        loopback_bind_library()
        return False
    if not offer_unsafe:
        raise WorkerError(f"cannot sandbox the TFF worker: {reason}; {SANDBOX_FIX}")
    raise WorkerError(
        f"cannot start the local TFF workers in their network sandbox: {reason}; "
        f"{SANDBOX_FIX}, or pass {UNSAFE_OPTION} to run them unsandboxed on loopback without "
        "authentication (docs/engine.md 'Remote workers')"
    )


def note_unsafe() -> None:
    """One ``fedprune: note:`` line: the local workers run unsandboxed, on loopback."""
    print(
        f"fedprune: note: local TFF workers run without their network sandbox ({UNSAFE_OPTION}, "
        f"because {sandbox_unavailable_reason()}): they listen on loopback without "
        "authentication, so any local user can reach them and run TensorFlow graphs as you",
        file=sys.stderr,
        flush=True,
    )


def open_log(path: Path, exclusive: bool = False) -> BinaryIO:
    """``path`` opened for appending, never through a symbolic link; created 0600, and with
    ``exclusive`` only if it does not exist yet. Anything but a regular file is refused."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
    if exclusive:
        flags |= os.O_EXCL
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise WorkerError(
                f"the TFF worker log {path} is a symbolic link; logs are never written through "
                "one: remove it, or choose another log file"
            ) from None
        if err.errno == errno.ENXIO:  # a FIFO without a reader, or a socket
            raise WorkerError(
                f"the TFF worker log {path} is not a regular file; remove it"
            ) from None
        raise WorkerError(
            f"cannot open the TFF worker log {path} ({err.strerror or err})"
        ) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise WorkerError(f"the TFF worker log {path} is not a regular file; remove it")
    os.set_blocking(fd, True)  # O_NONBLOCK only kept the open of a FIFO from hanging
    return os.fdopen(fd, "ab")


def _cache_folder() -> Path:
    """A private (0700) folder of this user for compiled helpers, created if missing."""
    try:
        env = os.environ.get(_ENV_CACHE_DIR)
        root = Path(env) if env else Path.home() / ".cache" / "fedprune"
    except (RuntimeError, KeyError):  # no home directory
        raise WorkerError(f"no home directory; set {_ENV_CACHE_DIR} to a folder") from None
    folder = root / f"native-{os.getuid()}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            pass
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            raise WorkerError(
                f"{folder} is not a folder of yours; remove it, or set {_ENV_CACHE_DIR} to "
                "another folder"
            )
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.chmod(folder, 0o700)
    except OSError as err:
        raise WorkerError(
            f"cannot make the private folder {folder} ({err.strerror or err}); set "
            f"{_ENV_CACHE_DIR} to a writable folder"
        ) from None
    return folder


def _c_compiler() -> str | None:
    """The C compiler to use: ``$CC``, Python's own (sysconfig), else cc, gcc or clang."""
    for candidate in (os.environ.get("CC"), sysconfig.get_config_var("CC"), "cc", "gcc", "clang"):
        words = shlex.split(candidate) if candidate else []
        found = shutil.which(words[0]) if words else None
        if found:
            return found
    return None


def _own_private_file(path: Path) -> bool:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    return (
        stat.S_ISREG(info.st_mode)
        and info.st_uid == os.getuid()
        and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


def loopback_bind_library() -> Path:
    """The compiled ``loopback_bind.c`` (see the module docstring), built on first use.

    Kept in a private 0700 folder (``$FEDPRUNE_CACHE_DIR`` or ``~/.cache/fedprune``, then
    ``native-<uid>/``) under a name keyed by the source's SHA-256 and the machine; compiled
    from exactly the hashed bytes into a temporary file there and renamed into place.
    :class:`WorkerError` if no C compiler is found or compiling fails."""
    source = LOOPBACK_SOURCE.read_bytes()
    key = hashlib.sha256(source + platform.machine().encode()).hexdigest()[:20]
    folder = _cache_folder()
    library = folder / f"loopback_bind-{key}.so"
    if any(c in str(library) for c in " :\t\n"):  # LD_PRELOAD splits at spaces and colons
        raise WorkerError(
            f"{library}: LD_PRELOAD cannot name a path with spaces or colons; set "
            f"{_ENV_CACHE_DIR} to a folder without them"
        )
    if _own_private_file(library):
        return library
    with_unsafe = f"{UNSAFE_OPTION} needs a C compiler to keep the workers on loopback"
    compiler = _c_compiler()
    if compiler is None:
        raise WorkerError(
            f"{with_unsafe}, and none was found (cc, gcc, clang or $CC); install one with the "
            "C library headers (e.g. `apt install gcc libc6-dev` or `dnf install gcc`)"
        )
    fd, temporary = tempfile.mkstemp(prefix=".loopback_bind-", suffix=".so", dir=folder)
    os.close(fd)
    try:
        detail = ""
        for libraries in (["-ldl"], []):  # dlsym is in libdl before glibc 2.34, in libc since
            command = [compiler, "-shared", "-fPIC", "-O2", "-x", "c", "-o", temporary, "-"]
            try:
                done = subprocess.run(
                    [*command, *libraries], input=source, capture_output=True, timeout=120
                )
            except (OSError, subprocess.TimeoutExpired) as err:
                detail = str(err)
                continue
            if done.returncode == 0:
                break
            lines = done.stderr.decode(errors="replace").strip().splitlines()
            detail = lines[-1] if lines else f"status {done.returncode}"
        else:
            raise WorkerError(
                f"{with_unsafe}; compiling {LOOPBACK_SOURCE.name} with {compiler} failed "
                f"({detail}); install a C compiler with the C library headers (e.g. `apt "
                "install gcc libc6-dev`)"
            )
        os.chmod(temporary, 0o700)
        os.replace(temporary, library)
    finally:
        if os.path.lexists(temporary):
            os.unlink(temporary)
    return library


def _proc_address(hex_address: str) -> IPAddress:
    """An address as ``/proc/net/tcp{,6}`` prints it: 32-bit words, each in host order."""
    raw = bytes.fromhex(hex_address)
    words = [int.from_bytes(raw[i : i + 4], "big") for i in range(0, len(raw), 4)]
    return ipaddress.ip_address(struct.pack(f"={len(words)}I", *words))


def is_loopback(address: IPAddress) -> bool:
    """Loopback, counting IPv4-mapped IPv6 (``::ffff:127.0.0.1``) as IPv4."""
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


def listening_addresses(pid: int) -> list[tuple[IPAddress, int]]:
    """(address, port) of every TCP socket that process ``pid`` holds in LISTEN state (its
    descriptors' socket inodes looked up in its ``/proc/<pid>/net/tcp`` and ``tcp6``)."""
    inodes = set()
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []
    for fd in descriptors:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    found = []
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                lines = f.read().splitlines()[1:]
        except OSError:  # no IPv6 in this kernel, or the process is gone
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and fields[9] in inodes:
                address, port = fields[1].split(":")
                found.append((_proc_address(address), int(port, 16)))
    return found


def _free_loopback_port() -> int:
    for family, host in ((socket.AF_INET6, "::1"), (socket.AF_INET, "127.0.0.1")):
        try:
            with socket.socket(family) as s:
                s.bind((host, 0))
                return s.getsockname()[1]
        except OSError:
            continue
    raise WorkerError("no free port on loopback (::1 or 127.0.0.1)")


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

    ``target`` is the gRPC target (``unix:...`` sandboxed, ``ipv6:[::1]:PORT`` or
    ``ipv4:127.0.0.1:PORT`` otherwise). Where the sandbox is unavailable, ``unsafe_open``
    starts the loopback-only plain worker; without it, :class:`WorkerError` (nothing started).
    ``new_log`` creates ``log_path`` exclusively (it must not exist yet).
    """

    def __init__(
        self,
        log_path: Path,
        max_concurrent_calls: int = -1,
        unsafe_open: bool = False,
        start_timeout: float = 60.0,
        new_log: bool = False,
    ):
        self.log_path = Path(log_path)
        self._dir: Path | None = None
        self._worker_pid: int | None = None
        sandboxed = require_sandbox(unsafe_open)
        worker = [
            str(worker_binary_path()),
            f"--max_concurrent_computation_calls={max_concurrent_calls}",
        ]
        self._log = open_log(self.log_path, exclusive=new_log)
        if sandboxed:
            self._start_sandboxed(worker, start_timeout)
        else:
            self._start_open(worker, start_timeout)

    def _start_open(self, worker: list[str], timeout: float) -> None:
        """The plain worker, its bind() kept on loopback by the interposer; checked in /proc."""
        try:
            library = loopback_bind_library()
            port = _free_loopback_port()
        except BaseException:
            self._log.close()
            raise
        env = worker_environment()
        env["LD_PRELOAD"] = " ".join(filter(None, [str(library), env.get("LD_PRELOAD")]))
        self.sandboxed = False
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-c", _EXEC_WITH_PARENT, str(os.getpid())]
                + [*worker, f"--port={port}"],
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                close_fds=True,
                env=env,
            )
        except OSError as err:
            self._log.close()
            raise WorkerError(f"cannot start the TFF worker ({err})") from None
        self._worker_pid = self.process.pid  # the wrapper execs worker_binary: same process
        try:
            self.target = self._wait_on_loopback(port, timeout)
        except BaseException:
            self.stop()
            raise

    def _wait_on_loopback(self, port: int, timeout: float) -> str:
        """Wait until the worker listens on ``port``; every socket it listens on must be a
        loopback one. Returns the gRPC target."""
        deadline = time.monotonic() + timeout
        while True:
            how = self.ended()
            if how is not None:
                how = "was interrupted" if how == "interrupt" else how
                raise WorkerError(f"the TFF worker {how} before it listened; see {self.log_path}")
            listening = listening_addresses(self.process.pid)
            exposed = [f"{a}:{p}" for a, p in listening if not is_loopback(a)]
            if exposed:
                raise WorkerError(
                    f"the TFF worker listened on {', '.join(exposed)}, not only on loopback, "
                    f"despite the LD_PRELOAD interposer; stopped it. Allow the sandbox instead: "
                    f"{SANDBOX_FIX}"
                )
            ours = [a for a, p in listening if p == port]
            if ours:
                address = ours[0]
                if address.version == 6 and address.ipv4_mapped is None:
                    return f"ipv6:[{address}]:{port}"
                return f"ipv4:127.0.0.1:{port}"
            if time.monotonic() > deadline:
                raise WorkerError(
                    f"the TFF worker did not listen on loopback port {port} in {timeout:.0f}s; "
                    f"see {self.log_path}"
                )
            time.sleep(0.02)

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
        env = worker_environment()
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
        return subprocess.Popen(
            [
                *("unshare", "--user", "--map-root-user", "--net"),
                *PYTHON,
                *("-m", "fedprune.workers.sandbox"),  # nothing from the cwd
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
