"""The gRPC channel to one TFF worker, without a thread that watches it.

TFF's ``RemoteExecutorGrpcStub`` subscribes to its channel's connectivity (only to answer
``is_ready``). A subscribed grpc channel keeps a polling thread that, whenever the state
changes, calls ``check_connectivity_state``; on a channel closed a moment before, that call
raises ``ValueError`` and the thread dies with a traceback on stderr. Ctrl-C goes to the whole
process group, so the local workers die (the state changes) while the command line closes the
channels: seen once in CI as "Exception in thread Thread-2 (_run): Traceback ..." above
"fedprune: interrupted".

:class:`WorkerChannel` passes every call to the grpc channel except ``subscribe``: it keeps
the stub's callback and tells it READY once :func:`connect` has seen the channel ready
(``grpc.channel_ready_future``, whose own subscription ends when the channel is ready). So no
polling thread outlives the connection, and closing a channel never races one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import grpc

Callback = Callable[[grpc.ChannelConnectivity], None]


class WorkerChannel(grpc.Channel):
    """A grpc channel whose ``subscribe`` callbacks are told READY by :func:`connect` instead
    of by a polling thread."""

    def __init__(self, channel: grpc.Channel) -> None:
        self._channel = channel
        self._callbacks: list[Callback] = []

    def subscribe(self, callback: Callback, try_to_connect: bool = False) -> None:
        self._callbacks.append(callback)

    def unsubscribe(self, callback: Callback) -> None:
        if callback in self._callbacks:
            self._callbacks.remove(callback)

    def tell_ready(self) -> None:
        for callback in list(self._callbacks):
            callback(grpc.ChannelConnectivity.READY)

    def unary_unary(self, *args: object, **kwargs: object) -> grpc.UnaryUnaryMultiCallable:
        return self._channel.unary_unary(*args, **kwargs)

    def unary_stream(self, *args: object, **kwargs: object) -> grpc.UnaryStreamMultiCallable:
        return self._channel.unary_stream(*args, **kwargs)

    def stream_unary(self, *args: object, **kwargs: object) -> grpc.StreamUnaryMultiCallable:
        return self._channel.stream_unary(*args, **kwargs)

    def stream_stream(self, *args: object, **kwargs: object) -> grpc.StreamStreamMultiCallable:
        return self._channel.stream_stream(*args, **kwargs)

    def close(self) -> None:
        self._callbacks.clear()
        self._channel.close()

    def __enter__(self) -> WorkerChannel:
        return self

    def __exit__(self, *exc_info: object) -> bool:
        self.close()
        return False


def open_channel(
    target: str,
    options: Sequence[tuple[str, object]],
    credentials: grpc.ChannelCredentials | None = None,
) -> WorkerChannel:
    """A (TLS when ``credentials`` are given) channel to ``target``; not yet connected."""
    if credentials is None:
        return WorkerChannel(grpc.insecure_channel(target, list(options)))
    return WorkerChannel(grpc.secure_channel(target, credentials, list(options)))


def connect(channel: WorkerChannel, timeout: float) -> bool:
    """Wait up to ``timeout`` s for the channel to be ready; then tell its subscribers READY.
    False if it was not ready in time."""
    ready = grpc.channel_ready_future(channel._channel)
    try:
        ready.result(timeout=timeout)
    except grpc.FutureTimeoutError:
        return False
    finally:
        ready.cancel()  # ends its subscription (a no-op once it is done)
    channel.tell_ready()
    return True
