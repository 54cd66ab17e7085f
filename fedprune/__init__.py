"""fedprune: clustered, pruned federated learning on TensorFlow Federated, for edge devices.

The Python API is :mod:`fedprune.api`; its names are also reachable here (``fedprune.caafp``,
``fedprune.from_arrays``, ...), imported on first use so that ``import fedprune`` stays light.

Importing fedprune before TensorFlow turns TensorFlow's oneDNN CPU kernels on
(``TF_ENABLE_ONEDNN_OPTS=1``) unless the variable is already set. TF 2.14 turns them on by
itself only on CPUs with AVX-512 VNNI / BF16 / AMX; elsewhere (most laptops, AVX2-only AMD
EPYC) it leaves them off, and then grouped convolutions have no gradient. With oneDNN on,
stacked fine-tuning uses its fastest formulation on every x86-64 CPU, and TFF rounds are
faster too (``make bench``, DEVELOPERS.md). The variable is inherited by the TFF worker
processes. An explicit ``TF_ENABLE_ONEDNN_OPTS=0`` is respected; where TensorFlow was imported
before fedprune, the variable can no longer act, and stacked training probes the kernels and
falls back to one convolution per client with a one-line note
(:mod:`fedprune.engine.stacked`).

It also hides TensorFlow's C++ log lines (``TF_CPP_MIN_LOG_LEVEL=3``, unless the variable is
set or TensorFlow is already imported), as ``fedprune`` and ``edge-export`` do unless
``--verbose``: a CA-AFP run from Python otherwise printed about a hundred of them (grappler's
optimizer lines, the oneDNN banner, CUDA factory and TF-TRT lines on a CPU machine). A run's
``verbose=True`` lets them through where the run is the first to import TensorFlow
(:mod:`fedprune.quiet`); ``TF_CPP_MIN_LOG_LEVEL=0`` set before importing fedprune keeps them
all.

At interpreter exit, where TFF was imported, fedprune releases TFF's execution contexts while
the interpreter is still whole (:func:`fedprune.workers.execution.release_default_context`):
TFF's import-time context otherwise prints a traceback from its ``__del__`` at the very end.
"""

import atexit
import os
import sys

# whether this import chose TensorFlow's C++ log level (fedprune.quiet may then change it)
CHOSE_TF_LOG_LEVEL = "tensorflow" not in sys.modules and "TF_CPP_MIN_LOG_LEVEL" not in os.environ
if "tensorflow" not in sys.modules:
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
if CHOSE_TF_LOG_LEVEL:
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"


def release_tff_at_exit() -> None:
    """The exit handler: release TFF's contexts where TFF was imported."""
    if "tensorflow_federated" in sys.modules:
        from fedprune.workers import execution

        execution.release_default_context()


atexit.register(release_tff_at_exit)

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """The public names of :mod:`fedprune.api`, imported on first use."""
    import importlib

    api = importlib.import_module("fedprune.api")
    if name in api.__all__:
        return getattr(api, name)
    raise AttributeError(f"module 'fedprune' has no attribute {name!r}")


def __dir__() -> list[str]:
    import importlib

    api = importlib.import_module("fedprune.api")

    return sorted(set(globals()) | set(api.__all__))
