"""No open doors: local workers only this user reaches, remote workers behind mutual TLS.

All traffic stays on 127.0.0.1 and Unix sockets; every wait is bounded; every test checks that
no worker process it started is left.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import signal
import socket
import ssl
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from fedprune.errors import ConfigError
from fedprune.workers import local as worker_process

# ----------------------------------------------------------------------------- helpers


def _make_pki(root: Path) -> dict[str, Path]:
    """Two CAs; a server and a client certificate from CA 1, a client certificate from CA 2."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    def name(cn):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def cert(subject, key, issuer_key, issuer, ca, usage=None):
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(subject))
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), False
            )
        )
        if ca:
            builder = builder.add_extension(
                x509.KeyUsage(True, False, False, False, False, True, True, False, False), True
            )
        else:
            san = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            builder = builder.add_extension(x509.SubjectAlternativeName(san), False)
            builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), False)
        return builder.sign(issuer_key, hashes.SHA256())

    def write(stem, key, certificate):
        pem = serialization.Encoding.PEM
        (root / f"{stem}.pem").write_bytes(certificate.public_bytes(pem))
        (root / f"{stem}.key").write_bytes(
            key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        )

    files: dict[str, Path] = {}
    server, client = ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH
    for ca_name, leaves in (
        ("ca", (("server", server), ("client", client))),
        ("other-ca", (("other-client", client),)),
    ):
        ca_key = ec.generate_private_key(ec.SECP256R1())
        write(ca_name, ca_key, cert(ca_name, ca_key, ca_key, name(ca_name), ca=True))
        files[ca_name] = root / f"{ca_name}.pem"
        for leaf, usage in leaves:
            key = ec.generate_private_key(ec.SECP256R1())
            write(leaf, key, cert(leaf, key, ca_key, name(ca_name), False, usage))
            files[leaf] = root / f"{leaf}.pem"
            files[f"{leaf}-key"] = root / f"{leaf}.key"
    return files


def _proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every visible process."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if fields[0] != "Z":
            table[int(entry)] = (int(fields[1]), cmd)
    return table


def _descendants(root: int) -> dict[int, str]:
    table = _proc_table()
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, cmd) in table.items():
            if ppid == parent and pid not in found:
                found[pid] = cmd
                frontier.append(pid)
    return found


def _our_worker_binaries() -> list[int]:
    """worker_binary processes below this test process (other sessions may run their own)."""
    return [pid for pid, cmd in _descendants(os.getpid()).items() if _is_worker_binary(cmd)]


def _is_worker_binary(cmdline: str) -> bool:
    """argv[0] is worker_binary (the forwarder only has it among its arguments)."""
    return cmdline.replace("\0", " ").split(" ", 1)[0].endswith("/worker_binary")


def _alive(pid: int) -> bool:
    return pid in _proc_table()


def _wait_gone(pids, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while any(_alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(int(link[8:-1]))
    return inodes


def _listening(net_dir: str) -> dict[int, str]:
    """inode -> local address of LISTEN TCP sockets in a /proc/.../net table."""
    out = {}
    for name in ("tcp", "tcp6"):
        try:
            lines = Path(net_dir, name).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A":
                out[int(fields[9])] = fields[1]
    return out


def _sandbox_or_skip() -> None:
    reason = worker_process.sandbox_unavailable_reason()
    if reason is not None:
        pytest.skip(f"no sandbox here: {reason}")


def _mean_computation():
    import tensorflow_federated as tff

    @tff.federated_computation(tff.FederatedType(tff.TensorType(np.float32, [1000]), tff.CLIENTS))
    def mean(x):
        return tff.federated_mean(x)

    return mean


CLIENT_VALUES = [np.random.default_rng(i).normal(size=1000).astype(np.float32) for i in range(3)]


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, Path]:
    return _make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def no_leftovers():
    """Every test: no worker of this process and no worker_binary below it afterwards."""
    from fedprune.workers import execution

    before = set(_our_worker_binaries())  # a module's `fedprune worker` may run already
    yield
    execution.shutdown()
    assert execution.running_pids() == []
    assert _wait_gone(set(_our_worker_binaries()) - before), _our_worker_binaries()


# ------------------------------------------------------------------- fast: configuration


def test_tls_options_go_together():
    from fedprune.workers.execution import RemoteTLS

    assert RemoteTLS.from_options(None, None, None) is None
    with pytest.raises(ConfigError, match="--tls-ca, --tls-cert and --tls-key go together"):
        RemoteTLS.from_options("ca.pem", None, "client.key")


def test_plain_text_remote_is_refused(no_leftovers):
    from fedprune.workers import execution

    with pytest.raises(ConfigError, match="plain text.*--tls-ca.*--insecure-remote"):
        execution.install(num_local_workers=0, remote_workers=("127.0.0.1:9",))
    assert execution.running_pids() == []


def test_cli_refuses_plain_text_remote(tmp_path, capsys, no_leftovers):
    from fedprune.cli import main

    argv = ["train", "fedavg", "--dataset", "uci_har", "--out", str(tmp_path / "run")]
    assert main([*argv, "--remote-worker", "127.0.0.1:9"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fedprune: error: remote TFF worker 127.0.0.1:9")
    assert "--insecure-remote" in err[0]


def test_insecure_remote_notes_once_and_unreachable_fails_fast(capsys, no_leftovers):
    from fedprune.workers import execution

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    with pytest.raises(
        execution.WorkerError, match=f"cannot reach remote TFF worker 127.0.0.1:{port}"
    ):
        execution.install(
            num_local_workers=0,
            remote_workers=(f"127.0.0.1:{port}",),
            insecure_remote=True,
            remote_timeout=120,
        )
    # fails at the refused connection (about 0.01 s idle), not at the 120 s timeout: the bound
    # is 6,000x the idle time and still half the timeout
    assert time.monotonic() - start < 60
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if line.startswith("fedprune: note:")] == err
    assert len(err) == 1 and "plain text" in err[0] and "warning" not in err[0].lower()


def test_silent_remote_times_out(pki, no_leftovers):
    """A host that accepts TCP but never answers: one clear line after remote_timeout."""
    from fedprune.workers import execution

    with socket.create_server(("127.0.0.1", 0)) as silent:
        target = f"127.0.0.1:{silent.getsockname()[1]}"
        tls = execution.RemoteTLS(str(pki["ca"]), str(pki["client"]), str(pki["client-key"]))
        start = time.monotonic()
        with pytest.raises(execution.WorkerError, match=f"{target} did not answer in 1s"):
            execution.install(
                num_local_workers=0, remote_workers=(target,), remote_tls=tls, remote_timeout=1
            )
        # waited for the 1 s timeout, then stopped: 60x the idle time, and no longer than the
        # timeout plus start-up could explain on any machine (it would otherwise hang forever)
        assert 1.0 <= time.monotonic() - start < 60


def test_without_sandbox_no_worker_starts(tmp_path, monkeypatch, capsys):
    """No sandbox: refused with one message naming the cause and both ways out; the worker
    never runs and no log is made (tests/workers/test_fail_closed.py has the rest)."""
    ran = tmp_path / "ran"
    fake = tmp_path / "worker_binary"
    fake.write_text(f"#!/bin/sh\ntouch {ran}\nexec sleep 30\n")
    fake.chmod(0o755)
    monkeypatch.setattr(worker_process, "worker_binary_path", lambda: fake)
    monkeypatch.setattr(worker_process, "sandbox_unavailable_reason", lambda: "no userns here")
    with pytest.raises(worker_process.WorkerError) as caught:
        worker_process.WorkerProcess(tmp_path / "w.log")
    message = str(caught.value)
    assert "no userns here" in message and "--unsafe-open-workers" in message
    assert "kernel.unprivileged_userns_clone=1" in message and "util-linux" in message
    assert not ran.exists() and not (tmp_path / "w.log").exists()
    assert capsys.readouterr().err == ""


# ------------------------------------------------------------------- slow: local sandbox


@pytest.mark.slow
def test_local_worker_has_no_host_port_and_computes(no_leftovers):
    _sandbox_or_skip()
    from fedprune.workers import execution

    (target,) = execution.install()
    assert target.startswith("unix:")
    sock = Path(target.removeprefix("unix:"))
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600 and sock.stat().st_uid == os.getuid()
    assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700
    pids = execution.running_pids()
    workers = [p for p in pids if _is_worker_binary(Path(f"/proc/{p}/cmdline").read_text())]
    assert len(pids) == 2 and len(workers) == 1 and _alive(workers[0])

    # No socket of the forwarder or the worker listens in the host's network namespace ...
    tree_inodes = set().union(*(_socket_inodes(p) for p in pids))
    assert not tree_inodes & set(_listening("/proc/self/net"))
    # ... yet the worker does listen: in its own namespace, whose only interface is loopback.
    inner = _listening(f"/proc/{workers[0]}/net")
    assert tree_inodes & set(inner)
    with open(f"/proc/{workers[0]}/net/dev") as f:
        interfaces = {line.split(":")[0].strip() for line in f.readlines()[2:]}
    assert interfaces == {"lo"}

    mean = _mean_computation()
    np.testing.assert_allclose(mean(CLIENT_VALUES), np.mean(CLIENT_VALUES, axis=0), rtol=1e-6)
    execution.shutdown()
    assert execution.running_pids() == [] and _wait_gone(pids)
    assert not sock.parent.exists()


# A stand-in for worker_binary: sleeps argv[1] seconds, then listens on --port=N (last arg).
STAND_IN_WORKER = (
    "import socket, sys, time\n"
    "time.sleep(float(sys.argv[1]))\n"
    "s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[-1].split('=')[1]))); s.listen()\n"
    "time.sleep(600)\n"
)


def _sandboxed_stand_in(directory: Path, start_delay: float) -> subprocess.Popen:
    return subprocess.Popen(
        [
            *("unshare", "--user", "--map-root-user", "--net"),
            *(sys.executable, "-m", "fedprune.workers.sandbox"),
            *("--socket", str(directory / "worker.sock"), "--parent-pid", str(os.getpid())),
            *("--", sys.executable, "-c", STAND_IN_WORKER, str(start_delay)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("when", ["serving", "starting"])
def test_sigterm_stops_the_forwarder_and_removes_its_socket_directory(tmp_path, when):
    """SIGTERM (what the forwarder gets when its parent dies) while it forwards, or while the
    worker has not listened yet: exit 128 + 15, the worker gone, no socket directory left."""
    _sandbox_or_skip()
    directory = tmp_path / "private"
    directory.mkdir(mode=0o700)
    forwarder = _sandboxed_stand_in(directory, start_delay=0.0 if when == "serving" else 30.0)
    try:
        worker = None
        if when == "serving":
            line = forwarder.stdout.readline()
            assert line.startswith("ready "), forwarder.stderr.read()
            worker = int(line.split()[1])
            assert (directory / "worker.sock").exists()
        else:
            time.sleep(1.0)
        forwarder.send_signal(signal.SIGTERM)
        assert forwarder.wait(15) == 128 + signal.SIGTERM, forwarder.stderr.read()
    finally:
        forwarder.kill()
        forwarder.wait()
    assert not directory.exists()
    if worker is not None:
        assert _wait_gone([worker])


@pytest.mark.slow
def test_killing_the_forwarder_kills_the_worker(tmp_path):
    _sandbox_or_skip()
    w = worker_process.WorkerProcess(tmp_path / "w.log")
    forwarder, worker = w.pids()
    try:
        os.kill(forwarder, signal.SIGKILL)
        assert _wait_gone([worker])
    finally:
        w.stop()
    assert _wait_gone([forwarder, worker])


# ------------------------------------------------------------------- slow: mutual TLS


@pytest.fixture(scope="module")
def tls_worker(pki, tmp_path_factory):
    """``fedprune worker`` on 127.0.0.1 (a free port), run as a separate process."""
    _sandbox_or_skip()
    logs = tmp_path_factory.mktemp("worker")
    stderr = open(logs / "stderr.txt", "w+")
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "fedprune.cli", "worker", "--port", "0"),
            *("--bind", "127.0.0.1", "--log", str(logs / "tff.log")),
            *("--tls-cert", str(pki["server"]), "--tls-key", str(pki["server-key"])),
            *("--client-ca", str(pki["ca"])),
        ],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    address = None
    timer = threading.Timer(60, proc.kill)  # bounded wait for the "listening" line
    timer.start()
    for line in proc.stdout:
        if "listening on" in line:
            address = line.split("listening on ")[1].split()[0]
            break
    timer.cancel()
    tree = _descendants(proc.pid)
    try:
        assert address and address.startswith("127.0.0.1:"), stderr.read()
        yield address, stderr
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        assert proc.returncode == 0
        assert _wait_gone(list(tree)), "fedprune worker left processes behind"
        stderr.close()


@pytest.mark.slow
def test_mutual_tls_gives_the_local_result(pki, tls_worker, no_leftovers):
    from fedprune.workers import execution

    address, _ = tls_worker
    mean = _mean_computation()
    execution.install()
    local = mean(CLIENT_VALUES)
    tls = execution.RemoteTLS(str(pki["ca"]), str(pki["client"]), str(pki["client-key"]))
    assert execution.install(num_local_workers=0, remote_workers=(address,), remote_tls=tls) == [
        address
    ]
    assert execution.running_pids() == []  # the remote worker is not ours
    remote = mean(CLIENT_VALUES)
    np.testing.assert_array_equal(remote, local)


@pytest.mark.slow
def test_client_certificate_from_another_ca_is_refused(pki, tls_worker, no_leftovers):
    from fedprune.workers import execution

    address, stderr = tls_worker
    tls = execution.RemoteTLS(
        str(pki["ca"]), str(pki["other-client"]), str(pki["other-client-key"])
    )
    start = time.monotonic()
    with pytest.raises(execution.WorkerError, match=f"{address} refused our certificate"):
        execution.install(
            num_local_workers=0, remote_workers=(address,), remote_tls=tls, remote_timeout=240
        )
    # refused at the first read after the handshake (under a second idle), not at the 240 s
    # timeout: the bound is over 100x the idle time and half the timeout
    assert time.monotonic() - start < 120
    time.sleep(0.2)
    stderr.seek(0)
    assert "fedprune worker: refused 127.0.0.1:" in stderr.read()


@pytest.mark.slow
def test_client_without_certificate_is_refused(pki, tls_worker):
    import grpc

    address, _ = tls_worker
    host, port = address.rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=str(pki["ca"]))
    ctx.set_alpn_protocols(["h2"])
    with pytest.raises(ssl.SSLError, match="(?i)alert"):  # TLS 1.3: the alert follows
        with ctx.wrap_socket(
            socket.create_connection((host, int(port)), 5), server_hostname=host
        ) as s:
            s.settimeout(5)
            s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            s.recv(9)

    def call(credentials) -> grpc.StatusCode:
        with grpc.secure_channel(address, credentials) as channel:
            try:
                channel.unary_unary("/fedprune.Test/Nothing")(b"", timeout=5)
            except grpc.RpcError as err:
                return err.code()
        return grpc.StatusCode.OK

    ca, cert, key = (pki[k].read_bytes() for k in ("ca", "client", "client-key"))
    assert call(grpc.ssl_channel_credentials(ca)) == grpc.StatusCode.UNAVAILABLE
    # control: with the certificate the call reaches the worker, which knows no such method
    with_cert = grpc.ssl_channel_credentials(ca, private_key=key, certificate_chain=cert)
    assert call(with_cert) == grpc.StatusCode.UNIMPLEMENTED


@pytest.mark.slow
def test_plain_text_client_gets_nothing_from_tls_worker(tls_worker, capsys, no_leftovers):
    from fedprune.workers import execution

    address, _ = tls_worker
    with pytest.raises(execution.WorkerError, match=f"remote TFF worker {address}"):
        execution.install(num_local_workers=0, remote_workers=(address,), insecure_remote=True)
