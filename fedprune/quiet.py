"""Keep TensorFlow's log lines out of the command's output unless ``--verbose`` is given.

TensorFlow writes from C++ straight to file descriptor 2: its own log lines (CUDA factory
registration, TF-TRT, the CPU feature guard, the oneDNN banner, the converter's SavedModel
steps), which ``TF_CPP_MIN_LOG_LEVEL=3`` silences if set before TensorFlow is imported, and a
few lines that no setting reaches (the converter's ``fully_quantize: ...``, TFLite's
``INFO: Created TensorFlow Lite XNNPACK delegate``). :func:`native_output` holds the latter
back while a conversion or an interpreter is set up, and writes them out after all if that
step fails. Python-side TF, Keras and absl logging and warnings are lowered to errors.

Nothing here imports TensorFlow at module level; the library is quiet only after a command
line (``fedprune``, ``edge-export``) called :func:`quiet_environment`; library callers get
TensorFlow's defaults less its C++ INFO lines (:mod:`fedprune`). The TFF worker processes
inherit ``TF_CPP_MIN_LOG_LEVEL``; their logs go to ``<run>/tff-logs/`` anyway.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import warnings
from collections.abc import Iterator

_QUIET = False


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
