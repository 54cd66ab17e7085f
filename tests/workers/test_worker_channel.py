"""The channel to a TFF worker: TFF's stub sees READY without a gRPC thread polling the
channel, so closing it while the worker dies (Ctrl-C) cannot race that thread."""

from __future__ import annotations

import socket
import threading
import time
from concurrent import futures

import grpc
import pytest
import tensorflow_federated as tff

from fedprune.workers import channel as worker_channel


class _RecordingChannel(grpc.Channel):
    def __init__(self) -> None:
        self.calls: list[str] = []

    def subscribe(self, callback, try_to_connect=False):
        self.calls.append("subscribe")

    def unsubscribe(self, callback):
        self.calls.append("unsubscribe")

    def unary_unary(self, method, *args, **kwargs):
        self.calls.append(f"unary_unary {method}")
        return "callable"

    def unary_stream(self, *args, **kwargs):
        raise AssertionError

    def stream_unary(self, *args, **kwargs):
        raise AssertionError

    def stream_stream(self, *args, **kwargs):
        raise AssertionError

    def close(self):
        self.calls.append("close")

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return False


def test_subscribers_are_told_ready_by_the_channel_not_by_grpc():
    inner = _RecordingChannel()
    channel = worker_channel.WorkerChannel(inner)
    seen = []
    channel.subscribe(seen.append, try_to_connect=True)
    assert inner.calls == [] and seen == []
    channel.tell_ready()
    assert seen == [grpc.ChannelConnectivity.READY]
    assert channel.unary_unary("/x/Y") == "callable"
    channel.close()
    channel.tell_ready()  # closed: nobody is subscribed any more
    assert seen == [grpc.ChannelConnectivity.READY]
    assert inner.calls == ["unary_unary /x/Y", "close"]


def _polling_threads() -> set[threading.Thread]:
    # grpc runs a subscribed channel's connectivity polling in a thread named "... (_run)"
    return {t for t in threading.enumerate() if t.name.endswith("(_run)")}


@pytest.fixture
def server_target():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(None)


def _settle(before: set[threading.Thread]) -> set[threading.Thread]:
    deadline = time.monotonic() + 2.0  # grpc's poller re-checks every 0.2 s
    while _polling_threads() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    return _polling_threads() - before


def test_a_connected_stub_is_ready_and_leaves_no_polling_thread(server_target):
    before = _polling_threads()
    channel = worker_channel.open_channel(server_target, [])
    stub = tff.framework.RemoteExecutorGrpcStub(channel)
    assert not stub.is_ready
    assert worker_channel.connect(channel, timeout=10.0)
    assert stub.is_ready
    assert _settle(before) == set()
    channel.close()


def test_the_stub_on_a_plain_channel_keeps_a_polling_thread(server_target):
    """The control: what the test above would see without WorkerChannel."""
    before = _polling_threads()
    channel = grpc.insecure_channel(server_target)
    stub = tff.framework.RemoteExecutorGrpcStub(channel)
    deadline = time.monotonic() + 10.0
    while not stub.is_ready and time.monotonic() < deadline:
        time.sleep(0.01)
    assert stub.is_ready
    time.sleep(0.5)
    assert _polling_threads() - before
    channel.close()


def test_no_worker_at_the_target_is_not_ready_in_time():
    with socket.socket() as sock:  # a local port with nothing listening once it is closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    channel = worker_channel.open_channel(f"127.0.0.1:{port}", [])
    assert not worker_channel.connect(channel, timeout=0.3)
    channel.close()
