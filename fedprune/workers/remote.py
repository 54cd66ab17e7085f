"""``fedprune worker``: a TFF worker for other hosts, behind mutual TLS.

``worker_binary`` itself has no authentication or encryption. Here it runs sandboxed (only a
Unix socket of this user reaches it, :mod:`fedprune.workers.local`), and this module
terminates TLS on ``BIND:PORT`` in front of it:

* the server presents ``--tls-cert``/``--tls-key`` and *requires* a client certificate signed
  by ``--client-ca`` (``CERT_REQUIRED``); TLS 1.2 at least; ALPN ``h2``, which gRPC clients
  insist on;
* each accepted connection is forwarded byte for byte to the worker's Unix socket; gRPC's
  HTTP/2 runs end to end between fedprune and the worker;
* a refused client gets one line on stderr (peer and reason), and nothing reaches the worker.

Refuses to start where the sandbox is unavailable: the worker's own port would then be open,
unauthenticated, next to the protected one. fedprune connects with ``--remote-worker
HOST:PORT --tls-ca CA --tls-cert CERT --tls-key KEY`` (:mod:`fedprune.workers.execution`).
One asyncio loop runs both sides; TLS goes through OpenSSL memory BIOs, so a refused client
still receives the alert that says why. Standard library only; TensorFlow is never imported here.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import ssl
import sys
import tempfile
from pathlib import Path

from fedprune.errors import ConfigError
from fedprune.workers.local import WorkerProcess, require_sandbox

HANDSHAKE_TIMEOUT = 10.0
_CHUNK = 1 << 20


def server_context(cert: str, key: str, client_ca: str) -> ssl.SSLContext:
    """TLS server context: our certificate, client certificates required from ``client_ca``."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    for flag, path in (("--tls-cert", cert), ("--tls-key", key), ("--client-ca", client_ca)):
        if not Path(path).is_file():
            raise ConfigError(f"{flag} {path}: no such file")
    try:
        ctx.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as err:
        raise ConfigError(
            f"cannot load --tls-cert {cert} with --tls-key {key} ({err}); "
            "give a PEM certificate and its matching PEM private key"
        ) from None
    try:
        ctx.load_verify_locations(cafile=client_ca)
    except (ssl.SSLError, OSError) as err:
        raise ConfigError(f"cannot load --client-ca {client_ca} ({err}); give a PEM CA") from None
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.set_alpn_protocols(["h2"])
    return ctx


class _TLSStream:
    """Server-side TLS over an asyncio stream through memory BIOs.

    Unlike asyncio's built-in TLS, a failed handshake still sends OpenSSL's alert (e.g.
    "certificate required", "unknown ca"), so the refused client learns why. All OpenSSL calls
    run synchronously on the event loop's thread, never concurrently.
    """

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, ctx: ssl.SSLContext
    ):
        self.reader, self.writer = reader, writer
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = ctx.wrap_bio(self.incoming, self.outgoing, server_side=True)

    async def _flush(self) -> None:
        data = self.outgoing.read()
        if data:
            self.writer.write(data)
            await self.writer.drain()

    async def _feed(self) -> bool:
        data = await self.reader.read(_CHUNK)
        if not data:
            self.incoming.write_eof()
            return False
        self.incoming.write(data)
        return True

    async def handshake(self) -> None:
        """Complete the handshake, or send the alert and raise ``ssl.SSLError``."""
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self._flush()
                if not await self._feed():
                    raise ConnectionError("closed by the client in the handshake") from None
            except ssl.SSLError:
                with contextlib.suppress(OSError, ConnectionError):
                    await self._flush()  # the alert
                raise
        await self._flush()

    async def read(self) -> bytes:
        """Decrypted bytes (all that the received records hold); ``b""`` at the end."""
        out = bytearray()
        while True:
            try:
                while len(out) < _CHUNK:
                    data = self.tls.read(_CHUNK)
                    if not data:
                        break
                    out += data
            except ssl.SSLWantReadError:
                if not out:
                    await self._flush()
                    if not await self._feed():
                        return b""
                    continue
            except ssl.SSLZeroReturnError:
                pass
            await self._flush()
            return bytes(out)

    async def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[self.tls.write(view) :]
        await self._flush()


async def _pump_from_tls(stream: _TLSStream, writer: asyncio.StreamWriter) -> None:
    while data := await stream.read():
        writer.write(data)
        await writer.drain()


async def _pump_to_tls(reader: asyncio.StreamReader, stream: _TLSStream) -> None:
    while data := await reader.read(_CHUNK):
        await stream.write(data)


class _Forwarder:
    def __init__(self, ctx: ssl.SSLContext, unix_path: str, handshake_timeout: float):
        self.ctx = ctx
        self.unix_path = unix_path
        self.handshake_timeout = handshake_timeout
        self.connections: set[asyncio.Task] = set()

    def close_all(self) -> None:
        """End every open connection (clients keep gRPC channels open indefinitely)."""
        for task in self.connections:
            task.cancel()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One client: TLS handshake (client certificate required), then forward to the worker."""
        peer = writer.get_extra_info("peername")
        peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        me = asyncio.current_task()
        self.connections.add(me)
        writers, pumps = [writer], []
        try:
            stream = _TLSStream(reader, writer, self.ctx)
            try:
                await asyncio.wait_for(stream.handshake(), self.handshake_timeout)
            except (ssl.SSLError, OSError, TimeoutError, ConnectionError) as err:
                print(f"fedprune worker: refused {peer}: {_why(err)}", file=sys.stderr, flush=True)
                return
            if stream.tls.selected_alpn_protocol() != "h2":
                print(f"fedprune worker: refused {peer}: no ALPN h2", file=sys.stderr, flush=True)
                return
            up_reader, up_writer = await asyncio.open_unix_connection(self.unix_path)
            writers.append(up_writer)
            pumps = [
                asyncio.ensure_future(_pump_from_tls(stream, up_writer)),
                asyncio.ensure_future(_pump_to_tls(up_reader, stream)),
            ]
            # HTTP/2 needs no half-close: when either direction ends, end both.
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        except (OSError, ConnectionError, asyncio.CancelledError):
            pass  # the client went away, or the server stops (close_all)
        finally:
            self.connections.discard(me)
            for pump in pumps:
                pump.cancel()
            for w in writers:
                w.close()


def _why(err: BaseException) -> str:
    """A failed handshake in words, for the one line logged per refused client."""
    if isinstance(err, ssl.SSLCertVerificationError):
        return f"its certificate does not verify against --client-ca ({err.verify_message})"
    reason = getattr(err, "reason", None)
    if reason == "PEER_DID_NOT_RETURN_A_CERTIFICATE":
        return "no client certificate"
    if reason and "ALERT" in reason:
        return f"the client rejected the TLS session ({reason}); does it trust our --tls-cert?"
    if isinstance(err, TimeoutError):
        return "no TLS handshake within the time limit"
    return f"TLS handshake failed ({reason or err or type(err).__name__})"


async def _serve(
    ctx: ssl.SSLContext, unix_path: str, bind: str | None, port: int, handshake_timeout: float
) -> None:
    forwarder = _Forwarder(ctx, unix_path, handshake_timeout)
    try:
        server = await asyncio.start_server(forwarder.handle, host=bind, port=port)
    except OSError as err:
        raise ConfigError(
            f"cannot listen on {bind or '*'}:{port} ({err.strerror or err}); "
            "choose another --port or --bind"
        ) from None
    addresses = ", ".join(_address(s.getsockname()) for s in server.sockets)
    print(
        f"fedprune worker: listening on {addresses} (mutual TLS; clients need a certificate "
        "signed by --client-ca); Ctrl-C stops it",
        flush=True,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()
    forwarder.close_all()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(server.wait_closed(), 5.0)


def _address(sockname: tuple) -> str:
    host, port = sockname[0], sockname[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def serve(
    port: int,
    cert: str,
    key: str,
    client_ca: str,
    bind: str | None = None,
    log_path: str | None = None,
    handshake_timeout: float = HANDSHAKE_TIMEOUT,
) -> None:
    """Run a sandboxed worker behind mutual TLS on ``bind:port`` until SIGTERM/SIGINT.

    ``bind`` None listens on all interfaces; ``port`` 0 picks a free one (printed). The TFF
    worker's log is ``log_path`` (appended to, never through a symbolic link), by default a
    new file in a new private (0700) folder under the temporary directory.
    """
    ctx = server_context(cert, key, client_ca)
    require_sandbox(offer_unsafe=False)  # never the worker's own port open beside ours
    new_log = log_path is None
    if log_path is None:
        log_path = str(Path(tempfile.mkdtemp(prefix="fedprune-worker-log-")) / "worker.log")
    print(f"fedprune worker: TFF worker log in {log_path}", flush=True)
    worker = WorkerProcess(Path(log_path), new_log=new_log)
    try:
        asyncio.run(_serve(ctx, worker.target.removeprefix("unix:"), bind, port, handshake_timeout))
    finally:
        worker.stop()
