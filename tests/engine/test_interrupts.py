"""A KeyboardInterrupt that Python drops (raised inside a garbage-collector callback, where
jax's ``_xla_gc_callback`` runs) is raised again in the main thread."""

from __future__ import annotations

import gc
import sys
import threading
import time
import weakref

import grpc
import pytest

from fedprune.engine import interrupts, rounds


def _interrupt_once_in_gc() -> object:
    raised = []

    def callback(phase: str, info: dict) -> None:
        if not raised:
            raised.append(phase)
            raise KeyboardInterrupt

    return callback


@pytest.fixture
def own_hook(monkeypatch):
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    interrupts.install()
    return seen


def test_python_drops_an_interrupt_raised_in_a_gc_callback(monkeypatch):
    """The bug itself: without the hook the interrupt only reaches the unraisable hook."""
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    callback = _interrupt_once_in_gc()
    gc.callbacks.append(callback)
    try:
        gc.collect()  # no KeyboardInterrupt here
    finally:
        gc.callbacks.remove(callback)
    assert [type(u.exc_value) for u in seen] == [KeyboardInterrupt]


def _busy(seconds: float) -> None:
    """Run bytecodes for ``seconds`` (a simulated interrupt is raised between two of them)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pass


def test_a_dropped_interrupt_is_raised_again_in_the_main_thread_once(own_hook):
    callback = _interrupt_once_in_gc()
    gc.callbacks.append(callback)
    try:
        # dropped in the collection, raised again by the watcher while the loop runs: the
        # loop's 120 s (2,400x the 0.05 s this takes idle) only end the test if it is never
        # raised, and then pytest.raises fails; no wall-clock bound a loaded machine can break
        with pytest.raises(KeyboardInterrupt):
            gc.collect()
            _busy(120.0)
    finally:
        gc.callbacks.remove(callback)
    assert own_hook == []  # not printed as "Exception ignored"
    _busy(0.3)  # once only
    interrupts.raise_if_dropped()


def test_an_interrupt_that_reached_its_caller_is_not_repeated(own_hook):
    with pytest.raises(KeyboardInterrupt):
        raise KeyboardInterrupt
    _busy(0.3)
    interrupts.raise_if_dropped()


def test_call_concurrently_raises_a_dropped_interrupt_while_it_waits(own_hook, tff_context):
    """A call that outlives the interrupt: the wait ends at its next 0.5 s poll, while the call
    still runs (the order of events is asserted, not a wall time)."""
    callback = _interrupt_once_in_gc()
    release, returned = threading.Event(), threading.Event()

    def slow_call() -> int:
        release.wait(120.0)
        returned.set()
        return 1

    gc.callbacks.append(callback)
    try:
        gc.collect()
    finally:
        gc.callbacks.remove(callback)
    try:
        with pytest.raises(KeyboardInterrupt):
            rounds.call_concurrently([slow_call])
        assert not returned.is_set()  # the interrupt came first, not the call's end
    finally:
        release.set()


def test_other_unraisable_exceptions_reach_the_previous_hook(own_hook):
    def callback(phase: str, info: dict) -> None:
        raise ValueError("not an interrupt")

    gc.callbacks.append(callback)
    try:
        gc.collect()
    finally:
        gc.callbacks.remove(callback)
    assert [type(u.exc_value) for u in own_hook][:1] == [ValueError]


class _ClosedChannel(grpc.RpcError):
    """What a gRPC stub raises once its worker has gone."""


def _release_a_value_whose_worker_is_gone() -> None:
    """As TFF's remote executor releases a value: a ``weakref.finalize`` that asks the
    worker to dispose of it, here failing as TFF re-raises a failed call."""

    class Value:
        pass

    def dispose() -> None:
        try:
            raise _ClosedChannel("Socket closed")
        except grpc.RpcError as err:
            raise RuntimeError("retryable gRPC error") from err

    value = Value()
    weakref.finalize(value, dispose)
    del value
    gc.collect()


def test_a_remote_value_released_after_ctrl_c_prints_nothing(own_hook, monkeypatch):
    monkeypatch.setattr(interrupts, "_received", threading.Event())
    interrupts._received.set()
    _release_a_value_whose_worker_is_gone()
    assert own_hook == []


def test_a_failed_remote_release_without_ctrl_c_is_still_reported(own_hook, monkeypatch):
    monkeypatch.setattr(interrupts, "_received", threading.Event())
    _release_a_value_whose_worker_is_gone()
    assert [type(u.exc_value) for u in own_hook] == [RuntimeError]


def test_install_twice_keeps_one_hook(own_hook):
    hook = sys.unraisablehook
    interrupts.install()
    assert sys.unraisablehook is hook


def test_sigint_is_noted_and_still_raises_keyboard_interrupt(own_hook):
    import os
    import signal

    assert not interrupts.received()
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1.0)  # the handler runs here
    assert interrupts.received()
    interrupts.install()  # a new command starts with a clean record
    assert not interrupts.received()


def test_an_error_after_sigint_is_the_interrupt_and_one_without_is_not(
    monkeypatch, capsys, tmp_path
):
    """What TF's tracing did to a Ctrl-C in CI: SystemError (in a StagingError) after SIGINT."""
    import os
    import signal

    from fedprune import cli

    def changed_on_its_way(args: object) -> None:
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1.0)
        except KeyboardInterrupt:
            raise SystemError("bad argument to internal function") from None

    monkeypatch.setattr(cli, "_train", changed_on_its_way)
    argv = ["train", "fedavg", "--dataset", "uci_har", "--out", str(tmp_path / "run")]
    assert cli.main(argv) == 130
    assert capsys.readouterr().err.strip().endswith("run the same command again to resume")

    def plain_bug(args: object) -> None:
        raise SystemError("a real bug")

    monkeypatch.setattr(cli, "_train", plain_bug)
    with pytest.raises(SystemError, match="a real bug"):
        cli.main(argv)
