"""TFLite Micro exports: a project per client model, or a standalone C array pair.

* :mod:`edge_export.micro.model`: the ops to register, the arena (measured, or bounded) and
  its headroom, outputs of the TFLite Micro Python interpreter.
* :mod:`edge_export.micro.c_array`: C/C++ text and the standalone ``.h`` / ``.cc`` pair
  (:func:`export_micro`, used for FedCRef's community models).
* :mod:`edge_export.micro.project`: a client's project folder (:func:`export_micro_project`).
* :mod:`edge_export.micro.host`: its ``main.cc``, ``Makefile`` and ``README.md``.
* :mod:`edge_export.micro.sources`: the TFLite Micro sources and flags of a host build.
* :mod:`edge_export.micro.build`: build and run a project against a TFLM tree, with the TFLM
  library objects cached.
"""

from edge_export.micro.c_array import c_identifier, export_micro, write_c_array
from edge_export.micro.model import (
    RESOLVER_METHODS,
    MicroExport,
    arena_headroom,
    arena_upper_bound,
    builtin_ops,
    check_micro_compatible,
    measure_arena,
    micro_outputs,
    quantize_input,
)
from edge_export.micro.project import MicroProject, export_micro_project

__all__ = [
    "RESOLVER_METHODS",
    "MicroExport",
    "MicroProject",
    "arena_headroom",
    "arena_upper_bound",
    "builtin_ops",
    "c_identifier",
    "check_micro_compatible",
    "export_micro",
    "export_micro_project",
    "measure_arena",
    "micro_outputs",
    "quantize_input",
    "write_c_array",
]
