"""Local TFF workers fail closed: no sandbox, no worker, unless --unsafe-open-workers, and then
on loopback only. Worker logs are never written through a planted link; bad worker options
are one error line.

The sandbox is hidden by a PATH of links to every tool but ``unshare`` (and the cached probe
cleared); the C compiler by leaving it out of that PATH too. Everything stays on loopback and
every test checks that no worker process it started is left.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import stat
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from fedprune.cli import main
from fedprune.workers import local as worker_process
from fedprune.workers import remote as remote_worker
from tests.conftest import har_arrays, write_uci_har
from tests.workers.test_worker_security import _descendants, _our_worker_binaries

FEDAVG = ["train", "fedavg", "--dataset", "uci_har", "--rounds", "1", "--clients-per-round", "2"]
FEDAVG += ["--local-epochs", "1", "--no-progress"]
# /proc/net/tcp{,6} print addresses as 32-bit words in host order (little-endian here)
LOOPBACK_HEX = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}


# ----------------------------------------------------------------------------- helpers


def _path_without(tmp: Path, *hidden: str) -> str:
    """A folder of links to every program on PATH except ``hidden``: the PATH of a machine
    without them."""
    folder = tmp / "bin"
    folder.mkdir()
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        try:
            names = os.listdir(directory or ".")
        except OSError:
            continue
        for name in names:
            link = folder / name
            if name in hidden or os.path.lexists(link):
                continue
            target = os.path.join(directory, name)
            if os.path.isfile(target) and os.access(target, os.X_OK):
                link.symlink_to(target)
    return str(folder)


@pytest.fixture
def no_unshare(tmp_path, monkeypatch):
    """This machine as if util-linux were not installed; a private cache folder."""
    monkeypatch.setenv("PATH", _path_without(tmp_path, "unshare"))
    monkeypatch.setenv("FEDPRUNE_CACHE_DIR", str(tmp_path / "cache"))
    worker_process.sandbox_unavailable_reason.cache_clear()
    assert "unshare" in worker_process.sandbox_unavailable_reason()
    yield
    worker_process.sandbox_unavailable_reason.cache_clear()


@pytest.fixture
def no_sandbox(tmp_path, monkeypatch):
    """The sandbox unavailable (without touching PATH); a private cache folder."""
    monkeypatch.setattr(worker_process, "sandbox_unavailable_reason", lambda: "no userns here")
    monkeypatch.setenv("FEDPRUNE_CACHE_DIR", str(tmp_path / "cache"))


def _children() -> dict[int, str]:
    """pid -> command line of every live process below this one."""
    return _descendants(os.getpid())


def _worker_binaries() -> list[int]:
    return _our_worker_binaries()


def _wait_gone(pids, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while any(Path(f"/proc/{p}").exists() and p in _children() for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _listening_hex(pid: int) -> list[tuple[str, int]]:
    """(address as /proc prints it, port) of each TCP socket of ``pid`` in LISTEN state, read
    from the host's tables (this test's own reading, not fedprune's)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:
                address, port = fields[1].split(":")
                found.append((address, int(port, 16)))
    return found


def _stand_in(tmp: Path, host: str) -> Path:
    """A stand-in for worker_binary: listens on ``host`` (a wildcard) at --port=N, answers
    ``hi`` to every connection."""
    family = "AF_INET6" if ":" in host else "AF_INET"
    script = tmp / "worker_binary"
    script.write_text(
        f"#!{sys.executable}\n"
        "import socket, sys\n"
        "port = int(sys.argv[-1].split('=')[1])\n"
        f"s = socket.socket(socket.{family})\n"
        + (
            "s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)\n"
            if family == "AF_INET6"
            else ""
        )
        + f"s.bind(({host!r}, port))\n"
        "s.listen()\n"
        "while True:\n"
        "    c, _ = s.accept()\n"
        "    c.sendall(b'hi')\n"
        "    c.close()\n"
    )
    script.chmod(0o755)
    return script


def _non_loopback_addresses() -> list[str]:
    """This host's own addresses other than loopback, if any: the IPv4 source address of its
    default route (a UDP connect sends nothing) and its global IPv6 addresses."""
    out = []
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("198.51.100.1", 9))  # TEST-NET-2: only the route is looked up
            out.append(s.getsockname()[0])
    except OSError:
        pass
    try:
        lines = Path("/proc/net/if_inet6").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        fields = line.split()
        if fields[3] == "00":  # global scope
            out.append(str(ipaddress.IPv6Address(bytes.fromhex(fields[0]))))
    return [a for a in out if not ipaddress.ip_address(a).is_loopback]


# --------------------------------------------------------------- fast: refuse by default


def test_train_without_sandbox_is_refused_before_anything(no_unshare, tmp_path, capsys):
    out = tmp_path / "run"
    before = set(_children())
    argv = [*FEDAVG, "--workers", "2", "--out", str(out)]
    rc = main([*argv, "--data-dir", str(tmp_path / "no-such-data")])  # never read
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and err[0].startswith("fedprune: error: "), err
    for fragment in (
        "`unshare`",
        "util-linux",
        "user.max_user_namespaces",
        "--unsafe-open-workers",
    ):
        assert fragment in err[0], err[0]
    assert not out.exists()
    assert not _worker_binaries() and set(_children()) <= before


def test_reproduce_without_sandbox_is_refused_before_anything(no_unshare, tmp_path, capsys):
    out = tmp_path / "results"
    assert main(["reproduce", "table2", "--quick", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--unsafe-open-workers" in err[0], err
    assert not out.exists()


def test_reproduce_hands_unsafe_open_workers_to_its_runs(no_sandbox, monkeypatch, tmp_path):
    """The runs are ``fedprune train`` children: they read the choice from the environment."""
    from fedprune import cli

    monkeypatch.delenv(cli.UNSAFE_OPEN_WORKERS_ENV, raising=False)
    monkeypatch.setattr(cli, "_reproduce_study", lambda args: None)
    monkeypatch.setattr(worker_process, "loopback_bind_library", lambda: None)
    argv = ["reproduce", "table2", "--quick", "--unsafe-open-workers", "--out", str(tmp_path)]
    assert main(argv) == 0
    assert os.environ[cli.UNSAFE_OPEN_WORKERS_ENV] == "1"
    args = cli.build_parser().parse_args([*FEDAVG, "--out", "x"])
    assert cli._unsafe_open_workers(args)


def test_library_install_without_sandbox_is_refused(no_sandbox):
    from fedprune.workers import execution

    with pytest.raises(execution.WorkerError, match="no userns here.*--unsafe-open-workers"):
        execution.install(num_local_workers=2)
    assert execution.running_pids() == [] and not _worker_binaries()


def test_unsafe_without_c_compiler_is_refused(tmp_path, monkeypatch, capsys):
    compilers = ["unshare", "cc", "gcc", "clang"]
    compilers += (sysconfig.get_config_var("CC") or "cc").split()[:1]
    monkeypatch.setenv("PATH", _path_without(tmp_path, *compilers))
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("FEDPRUNE_CACHE_DIR", str(tmp_path / "cache"))
    worker_process.sandbox_unavailable_reason.cache_clear()
    try:
        out = tmp_path / "run"
        rc = main([*FEDAVG, "--unsafe-open-workers", "--out", str(out)])
    finally:
        worker_process.sandbox_unavailable_reason.cache_clear()
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and err[0].startswith("fedprune: error: --unsafe-open-workers needs")
    assert "C compiler" in err[0] and "apt install gcc" in err[0]
    assert not out.exists() and not _worker_binaries()


def test_unsafe_changes_nothing_where_the_sandbox_works(monkeypatch):
    monkeypatch.setattr(worker_process, "sandbox_unavailable_reason", lambda: None)

    def never():
        raise AssertionError("compiled the interposer although the sandbox works")

    monkeypatch.setattr(worker_process, "loopback_bind_library", never)
    assert worker_process.require_sandbox(True) is True
    assert worker_process.require_sandbox(False) is True


def test_fedprune_worker_refuses_without_sandbox_and_names_no_unsafe_option(no_sandbox):
    with pytest.raises(worker_process.WorkerError) as caught:
        worker_process.require_sandbox(offer_unsafe=False)
    assert "no userns here" in str(caught.value) and "unsafe" not in str(caught.value)


# ----------------------------------------- fast: --unsafe-open-workers keeps to loopback


def test_interposer_is_compiled_once_into_a_private_folder(no_sandbox, tmp_path):
    library = worker_process.loopback_bind_library()
    assert library.parent.parent == tmp_path / "cache"
    assert stat.S_IMODE(library.parent.stat().st_mode) == 0o700
    info = os.lstat(library)
    assert stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid()
    assert not info.st_mode & 0o022
    assert [p.name for p in library.parent.iterdir()] == [library.name]  # no temporary left
    mtime = info.st_mtime_ns
    assert worker_process.loopback_bind_library() == library
    assert os.lstat(library).st_mtime_ns == mtime  # not compiled again


@pytest.mark.parametrize("wildcard", ["::", "0.0.0.0"])
def test_wildcard_bind_becomes_loopback(no_sandbox, tmp_path, monkeypatch, wildcard):
    if sys.byteorder != "little":
        pytest.skip("LOOPBACK_HEX is written for little-endian /proc tables")
    monkeypatch.setattr(worker_process, "worker_binary_path", lambda: _stand_in(tmp_path, wildcard))
    worker = worker_process.WorkerProcess(tmp_path / "w.log", unsafe_open=True, start_timeout=30)
    try:
        pids = worker.pids()
        assert not worker.sandboxed and pids == [worker.process.pid]
        port = int(worker.target.rsplit(":", 1)[1])
        listening = _listening_hex(pids[0])
        assert listening and all(address in LOOPBACK_HEX for address, _ in listening), listening
        assert {p for _, p in listening} == {port}
        if wildcard == "::":
            assert worker.target == f"ipv6:[::1]:{port}"
            host = "::1"
        else:
            assert worker.target == f"ipv4:127.0.0.1:{port}"
            host = "127.0.0.1"
        with socket.create_connection((host, port), timeout=5) as s:
            assert s.recv(2) == b"hi"
        for address in _non_loopback_addresses():
            with pytest.raises(OSError):
                socket.create_connection((address, port), timeout=2).close()
    finally:
        worker.stop()
    assert _wait_gone(pids)


def test_a_worker_seen_on_a_wildcard_is_stopped(no_sandbox, tmp_path, monkeypatch):
    """Fail closed if the interposer did not take (here: LD_PRELOAD names no library)."""
    monkeypatch.setattr(worker_process, "worker_binary_path", lambda: _stand_in(tmp_path, "::"))
    monkeypatch.setattr(worker_process, "loopback_bind_library", lambda: tmp_path / "none.so")
    before = set(_children())
    with pytest.raises(worker_process.WorkerError, match="not only on loopback"):
        worker_process.WorkerProcess(tmp_path / "w.log", unsafe_open=True, start_timeout=30)
    assert _wait_gone(set(_children()) - before)


# ------------------------------------------------------------------------- fast: logs


def test_log_never_follows_a_planted_link(no_sandbox, tmp_path, monkeypatch):
    ran = tmp_path / "ran"
    fake = tmp_path / "worker_binary"
    fake.write_text(f"#!/bin/sh\ntouch {ran}\nexec sleep 30\n")
    fake.chmod(0o755)
    monkeypatch.setattr(worker_process, "worker_binary_path", lambda: fake)
    target = tmp_path / "victim"
    target.write_text("precious\n")
    planted = tmp_path / "worker-0.log"
    planted.symlink_to(target)
    with pytest.raises(worker_process.WorkerError, match="is a symbolic link"):
        worker_process.WorkerProcess(planted, unsafe_open=True)
    assert target.read_text() == "precious\n" and planted.is_symlink()
    assert not ran.exists()


def test_log_is_appended_on_resume(tmp_path):
    path = tmp_path / "worker-0.log"
    path.write_bytes(b"first run\n")
    with worker_process.open_log(path) as log:
        log.write(b"second run\n")
    assert path.read_bytes() == b"first run\nsecond run\n"
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)
    with pytest.raises(worker_process.WorkerError, match="not a regular file"):
        worker_process.open_log(fifo)  # and it does not hang waiting for a reader


def test_fedprune_worker_default_log_is_new_and_private(tmp_path, monkeypatch):
    """``fedprune worker`` without --log: a new 0600 file in a new 0700 folder, created
    exclusively (a link planted at the path is refused, not followed)."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(remote_worker.tempfile, "tempdir", None)
    paths = []

    class Started(Exception):
        pass

    def fake_worker(log_path, new_log=False):
        paths.append(log_path)
        with worker_process.open_log(log_path, exclusive=new_log):
            pass
        raise Started

    monkeypatch.setattr(remote_worker, "server_context", lambda *args: None)
    monkeypatch.setattr(remote_worker, "require_sandbox", lambda **kwargs: True)
    monkeypatch.setattr(remote_worker, "WorkerProcess", fake_worker)
    with pytest.raises(Started):
        remote_worker.serve(0, "cert", "key", "ca")
    (log,) = paths
    assert log.parent.parent == tmp_path and log.parent.name.startswith("fedprune-worker-")
    assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    log.unlink()
    log.symlink_to(victim)
    with pytest.raises(worker_process.WorkerError, match="symbolic link|exists"):
        worker_process.open_log(log, exclusive=True)
    assert victim.read_text() == "precious\n"


# ------------------------------------------------------- fast: bad numbers, one line


WORKER = ["worker", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--client-ca", "ca.pem"]


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (WORKER + ["--port", "-5"], "argument --port: must be an integer in [0, 65535]"),
        (WORKER + ["--port", "70000"], "argument --port: must be an integer in [0, 65535]"),
        (WORKER + ["--port", "80.5"], "argument --port: must be an integer in [0, 65535]"),
        (FEDAVG + ["--remote-timeout", "-1"], "argument --remote-timeout: must be a positive"),
        (FEDAVG + ["--remote-timeout", "nan"], "argument --remote-timeout: must be a positive"),
        (FEDAVG + ["--remote-timeout", "inf"], "argument --remote-timeout: must be a positive"),
        (FEDAVG + ["--remote-worker", "node2:70000"], "the port must be in [1, 65535]"),
        (FEDAVG + ["--remote-worker", "node2:0"], "the port must be in [1, 65535]"),
    ],
)
def test_bad_worker_numbers_are_one_error_line(argv, fragment, tmp_path, capsys):
    if argv[0] == "train":
        argv = [*argv, "--out", str(tmp_path / "run")]
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and fragment in errors[0], err
    assert "Traceback" not in err and not (tmp_path / "run").exists()


# -------------------------------------------------- slow: TFF workers with the real binary


@pytest.mark.slow
def test_unsafe_train_runs_with_workers_on_loopback_only(no_unshare, tmp_path, monkeypatch, capsys):
    from fedprune.workers import execution

    data = tmp_path / "data"
    (data / "uci_har").mkdir(parents=True)
    write_uci_har(data / "uci_har", *har_arrays(6, subjects=tuple(range(1, 7))))
    seen = {}
    install = execution.install

    def install_and_look(*args, **kwargs):
        targets = install(*args, **kwargs)
        pids = execution.running_pids()
        seen.update(targets=targets, pids=pids, listening=[_listening_hex(p) for p in pids])
        seen["worker_binaries"] = _worker_binaries()
        return targets

    monkeypatch.setattr(execution, "install", install_and_look)
    out = tmp_path / "run"
    argv = [*FEDAVG, "--workers", "2", "--unsafe-open-workers", "--out", str(out)]
    rc = main([*argv, "--data-dir", str(data)])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert (out / "summary.json").is_file()
    notes = [line for line in err.splitlines() if line.startswith("fedprune: note: local TFF")]
    assert len(notes) == 1 and "loopback without authentication" in notes[0], err
    assert "any local user" in notes[0]
    assert len(seen["targets"]) == 2 and len(seen["pids"]) == 2
    assert sorted(seen["pids"]) == sorted(seen["worker_binaries"])  # the real worker_binary
    for target, listening in zip(seen["targets"], seen["listening"]):
        port = int(target.rsplit(":", 1)[1])
        assert listening and {p for _, p in listening} == {port}, listening
        assert all(address in LOOPBACK_HEX for address, _ in listening), listening
    for log in ("worker-0.log", "worker-1.log"):
        assert stat.S_IMODE((out / "tff-logs" / log).stat().st_mode) == 0o600
    assert execution.running_pids() == [] and _wait_gone(seen["pids"])
