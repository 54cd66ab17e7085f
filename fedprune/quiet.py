"""Keep TensorFlow's log lines out of the command's output unless ``--verbose`` is given.

TensorFlow writes from C++ straight to file descriptor 2: its own log lines (CUDA factory
registration, TF-TRT, the CPU feature guard, the oneDNN banner, the converter's SavedModel
steps), which ``TF_CPP_MIN_LOG_LEVEL=3`` silences if set before TensorFlow is imported, and a
few lines that no setting reaches (the converter's ``fully_quantize: ...``, TFLite's
``INFO: Created TensorFlow Lite XNNPACK delegate``). :func:`native_output` holds the latter
back while a conversion or an interpreter is set up, and writes them out after all if that
step fails. Python-side TF, Keras and absl logging and warnings are lowered to errors.

Nothing here imports TensorFlow at module level. A command line (``fedprune``,
``edge-export``) calls :func:`quiet_environment`; a Python caller's run
(:meth:`fedprune.api.trainer.Trainer.run`) is quiet the same way for its duration unless
``verbose=True`` (:func:`quiet_run`): importing fedprune first sets ``TF_CPP_MIN_LOG_LEVEL=3``
(:mod:`fedprune`), and where TensorFlow was imported before fedprune, at a level that lets
its C++ lines through, :func:`native_lines_filtered` drops those lines from file descriptor
2 while the run lasts. The TFF worker processes write to ``<run>/tff-logs/``, never to the
caller's terminal.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import re
import select
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterator

_QUIET = False

NATIVE_LINE = re.compile(
    rb"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] |[IWEF]\d{4} [\d:.]+ +\d+ )" rb"[^\s\]]+:\d+\] "
)
"""A line TensorFlow's C++ logging writes (``2026-12-02 14:47:07.731749: I
tensorflow/core/grappler/devices.cc:66] ...``), or absl's (``I0000 00:00:1700000000.1 123
file.cc:45] ...``)."""
CONTINUED = (b"To enable the following instructions:",)
"""Lines that continue the native line before them (the CPU feature guard's second line)."""
KEPT_FOR_DIAGNOSIS = 40
"""Dropped native lines kept to show after all if the run fails other than by an error
fedprune explains."""


def quiet_environment(verbose: bool) -> None:
    """Unless ``verbose``: ``TF_CPP_MIN_LOG_LEVEL=3`` (an explicit value is kept; it acts only
    if TensorFlow is not imported yet) and hold native log lines back from now on."""
    import fedprune

    global _QUIET
    _QUIET = not verbose
    if fedprune.CHOSE_TF_LOG_LEVEL:  # the library's INFO-only default: the command decides
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0" if verbose else "3"
    elif not verbose:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def quiet_python_logging() -> None:
    """After TensorFlow is imported (and if :func:`quiet_environment` made things quiet):
    TF's and absl's Python loggers show errors only, TF/Keras/tfmot warnings are ignored."""
    if not _QUIET:
        return
    import absl.logging
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    absl.logging.set_verbosity("error")
    for module in ("tensorflow", "keras", "tensorflow_model_optimization", "absl"):
        warnings.filterwarnings("ignore", module=rf"{module}(\.|$)")


@contextlib.contextmanager
def native_output() -> Iterator[None]:
    """Hold back what C++ code writes to file descriptor 2 inside the block (when quiet); on
    an exception other than an interrupt it is written to stderr after all, as a diagnosis."""
    if not _QUIET:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        except Exception:
            os.dup2(saved, 2)
            held.seek(0)
            os.write(2, held.read())
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _tf_lines_reach_stderr() -> bool:
    """Whether TensorFlow's C++ lines reach file descriptor 2: TensorFlow is imported, and
    ``TF_CPP_MIN_LOG_LEVEL`` was not 3 when it was (TensorFlow reads it once; fedprune sets
    3 when imported first, and the variable is assumed unchanged since)."""
    return "tensorflow" in sys.modules and os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0") != "3"


@contextlib.contextmanager
def quiet_run(verbose: bool) -> Iterator[None]:
    """A Python caller's run as quiet as ``fedprune train`` unless ``verbose``: TensorFlow
    not yet imported, ``TF_CPP_MIN_LOG_LEVEL`` as :func:`quiet_environment` sets it (3, or
    0 when ``verbose``; a value you set is kept); TensorFlow imported at a level that lets its
    C++ lines through, those lines dropped from file descriptor 2 for the block
    (:func:`native_lines_filtered`); TF's, absl's and Keras' Python log records and warnings
    below errors hidden for the block, and restored after it. Inside a command line (already
    quiet or verbose by its ``--verbose``) this does nothing."""
    import fedprune

    if _QUIET or "tensorflow" not in sys.modules and not fedprune.CHOSE_TF_LOG_LEVEL:
        yield  # a command line decided, or TF will read the level you set
        return
    if "tensorflow" not in sys.modules:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0" if verbose else "3"
    if verbose:
        yield
        return
    loggers = [logging.getLogger(name) for name in ("tensorflow", "absl")]
    levels = [logger.level for logger in loggers]
    with warnings.catch_warnings(), native_lines_filtered(_tf_lines_reach_stderr()):
        for module in ("tensorflow", "keras", "tensorflow_model_optimization", "absl"):
            warnings.filterwarnings("ignore", module=rf"{module}(\.|$)")
        for logger in loggers:
            logger.setLevel(logging.ERROR)
        try:
            yield
        finally:
            for logger, level in zip(loggers, levels):
                logger.setLevel(level)


@contextlib.contextmanager
def native_lines_filtered(active: bool = True) -> Iterator[None]:
    """File descriptor 2 through a pipe for the block: lines that C++ logging writes
    (:data:`NATIVE_LINE` and the lines in :data:`CONTINUED` after one) are dropped, every
    other byte is passed on at once, a partial line too (progress bars redraw with
    ``\r``). If the block raises an exception other than a
    :class:`~fedprune.errors.FedpruneError` (which explains itself) or an interrupt, the
    last dropped lines are written after all, as a diagnosis."""
    if not active:
        yield
        return
    from fedprune.errors import FedpruneError

    sys.stderr.flush()
    saved = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)
    dropped: collections.deque[bytes] = collections.deque(maxlen=KEPT_FOR_DIAGNOSIS)
    done = threading.Event()
    pump = threading.Thread(
        target=_pump, args=(read_end, saved, dropped, done), name="fedprune-stderr", daemon=True
    )
    pump.start()
    failed = False
    try:
        yield
    except (FedpruneError, KeyboardInterrupt):
        raise
    except BaseException:
        failed = True
        raise
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # our end of the pipe closes: the pump reads to its end
        done.set()
        pump.join(timeout=5)
        os.close(read_end)
        os.close(saved)
        if failed and dropped:
            os.write(2, b"".join(dropped))


def _pump(read_end: int, out: int, dropped: collections.deque, done: threading.Event) -> None:
    """Copy ``read_end`` to ``out`` less native log lines (:func:`native_lines_filtered`),
    until the pipe ends, or ``done`` is set and nothing more is waiting (a child process
    may still hold the pipe open)."""
    pending, passing, after_native = b"", False, False
    while True:
        ready, _, _ = select.select([read_end], [], [], 0.05)
        if not ready:
            if done.is_set():
                break
            continue
        chunk = os.read(read_end, 1 << 16)
        if not chunk:
            break
        pending += chunk
        *lines, pending = re.split(rb"(?<=[\n\r])", pending)
        for line in lines:
            if passing:  # the rest of a line already passed on in part
                os.write(out, line)
                passing = False
            elif NATIVE_LINE.match(line) or (after_native and line.startswith(CONTINUED)):
                dropped.append(line)
                after_native = True
            else:
                os.write(out, line)
                after_native = False
        if pending and (passing or not _may_start_native(pending)):
            os.write(out, pending)
            pending, passing = b"", True
    if pending:
        os.write(out, pending)


def _may_start_native(start: bytes) -> bool:
    """Whether a partial line could still become a native log line (held back till its end)."""
    if len(start) > 200:
        return False
    first = start[:1]
    return (
        first.isdigit() or first in b"IWEF" or any(c.startswith(start[: len(c)]) for c in CONTINUED)
    )
