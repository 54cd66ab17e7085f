"""Ctrl-C that cannot be lost while a TFF call is waited on.

Python runs a signal handler between two bytecodes of the main thread, wherever they are.
If that happens inside a garbage-collector callback (jax, imported by TFF, registers
``_xla_gc_callback``), the ``KeyboardInterrupt`` raised there is passed to
``sys.unraisablehook``, printed as "Exception ignored" and dropped: the interrupt is gone,
the TFF worker that the same SIGINT killed never answers, and the run waits forever (seen in
1 of 4 FedCRef runs interrupted while their first computation was being built).

:func:`install` puts a hook in front of ``sys.unraisablehook`` that *records* a dropped
``KeyboardInterrupt`` instead of printing it. A watcher thread then interrupts the main
thread again 50 ms later (``_thread.interrupt_main``; at once, from the hook, it would be
raised inside the same callback and dropped again), which reaches the caller wherever the
main thread is, e.g. building a TFF computation (without it, such an interrupt waited for
the next TFF call: 6.5-7.8 s in 4 of 12 interrupted FedCRef runs). If that one is dropped
too, the hook records it again. :func:`raise_if_dropped`, polled by
``rounds.call_concurrently`` while it waits for TFF, is a second net, and the worker
liveness check in ``execution.check_workers`` a third: a worker that the same Ctrl-C ended
turns into ``KeyboardInterrupt`` too. An interrupt that reached its caller normally is
never recorded, so it is never raised twice.

A ``KeyboardInterrupt`` raised while TensorFlow traces a graph can also come back changed:
raised inside a C call that autograph makes, it surfaced as ``SystemError: ... bad argument
to internal function`` wrapped in autograph's ``StagingError`` (seen once in CI, a FedCRef
run interrupted while its first computation was traced). The SIGINT handler therefore also
notes that SIGINT came (:func:`received`), and the command line treats any exception that
follows it as the interrupt.
"""

from __future__ import annotations

import _thread
import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterator

REPEAT_AFTER_S = 0.05
_dropped = threading.Event()
_received = threading.Event()
_watcher: threading.Thread | None = None


def _repeat_dropped_interrupts() -> None:
    while True:
        _dropped.wait()
        time.sleep(REPEAT_AFTER_S)  # let the callback that dropped it return
        if _dropped.is_set():
            _dropped.clear()
            _thread.interrupt_main()


def _record_dropped_interrupt(unraisable: object) -> None:
    exc = getattr(unraisable, "exc_value", None)
    if isinstance(exc, KeyboardInterrupt):
        _dropped.set()  # raised again by raise_if_dropped; nothing to print
        return
    if _received.is_set() and _from_a_closed_rpc(exc):
        return  # a remote value released after the same Ctrl-C ended its worker
    _previous_hook(unraisable)


def _from_a_closed_rpc(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or an exception it was raised from) is a failed gRPC call.

    TFF releases a remote value in a ``weakref`` finalizer that asks its worker to dispose
    of it; after Ctrl-C, which ends the workers too, that call fails ("Socket closed") and
    Python prints the failure as an unraisable exception in the middle of the clean
    interrupt message. Nothing is lost by dropping it: the worker and its values are gone."""
    grpc = sys.modules.get("grpc")
    seen = 0
    while exc is not None and seen < 8:
        if grpc is not None and isinstance(exc, grpc.RpcError):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


_previous_hook = sys.unraisablehook


def _on_sigint(signum: int, frame: object) -> None:
    """Python's default SIGINT handler (``KeyboardInterrupt``), noting that SIGINT came."""
    _received.set()
    raise KeyboardInterrupt


def received() -> bool:
    """Whether SIGINT reached this process since :func:`install`."""
    return _received.is_set()


def raise_if_received() -> None:
    """``KeyboardInterrupt`` if SIGINT reached this process since :func:`install`: polled
    at the stage boundaries of a long computation, so that an interrupt that a library
    swallowed still ends the command there."""
    if _received.is_set():
        raise KeyboardInterrupt


def _note_sigint(signum: int, frame: object) -> None:
    _received.set()


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """SIGINT inside the block is only noted (:func:`received`), not raised where it lands;
    the block polls :func:`raise_if_received` at points where raising is safe, and its end
    raises an interrupt that came meanwhile.

    For TensorFlow's eager operations (e.g. a Keras ``fit``): their C++ fast path calls
    Python (``TensorShape.__len__`` while converting an operation's attributes), and a
    ``KeyboardInterrupt`` raised there is dropped by the C++ code, which then carries on
    (``iter(dataset)`` returns normally), or leaves its heap corrupted (glibc aborts:
    "corrupted size vs. prev_size"). Only where SIGINT raises (the main thread, with a
    Python handler in place); elsewhere the block runs unchanged. Without :func:`install`'s
    handler (library use), the note ends with the block."""
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        yield
        return
    signal.signal(signal.SIGINT, _note_sigint)
    try:
        yield
        raise_if_received()
    finally:
        signal.signal(signal.SIGINT, previous)
        if previous is not _on_sigint:
            _received.clear()


def install() -> None:
    """Record (rather than print) a ``KeyboardInterrupt`` that Python had to drop and raise it
    again in the main thread; every other unraisable exception goes to the hook that was
    there before. Idempotent.

    SIGINT raises ``KeyboardInterrupt`` as Python's default handler does (and is noted for
    :func:`received`, whose record this call clears) even where the process
    started with SIGINT ignored: a shell script's background job (``cmd &``) inherits an
    ignored SIGINT, and so would every training a reproduction starts, which could then not
    be stopped (``fedprune reproduce`` stops its children with SIGINT so they checkpoint)."""
    global _previous_hook, _watcher
    _received.clear()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _on_sigint)
    if _watcher is None:
        _watcher = threading.Thread(
            target=_repeat_dropped_interrupts, daemon=True, name="fedprune-interrupts"
        )
        _watcher.start()
    if sys.unraisablehook is not _record_dropped_interrupt:
        _previous_hook = sys.unraisablehook
        sys.unraisablehook = _record_dropped_interrupt


def raise_if_dropped() -> None:
    """``KeyboardInterrupt`` if Python dropped one since the last call."""
    if _dropped.is_set():
        _dropped.clear()
        raise KeyboardInterrupt
