"""Where a TFLite Micro project's files are and what its arena numbers are."""

from __future__ import annotations

import dataclasses
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class MicroProject:
    """What :func:`export_micro_project` wrote."""

    folder: Path
    ident: str
    ops: list[str]
    arena_bytes: int  # the minimum: measured, or the graph's upper bound
    arena_measured: bool
    headroom_bytes: int
    test_vectors: int
    expected_by: str  # what computed the expected outputs in test_vectors.h
    # median ms of one invoke of the TFLite Micro Python interpreter (reference kernels) on
    # this host over the test vectors; None without tflite-micro
    latency_ms: float | None = None
    # ops registered with their int8-only kernel variants (model.INT8_REGISTRATIONS)
    int8_ops: tuple[str, ...] = ()
    target: str = "host"  # the Makefile's default TARGET (targets.TARGETS)
    # the test vectors' class counts, in label order (None: classes unknown)
    class_counts: tuple[int, ...] | None = None

    @property
    def arena_size(self) -> int:
        """The arena the firmware allocates: minimum + headroom."""
        return self.arena_bytes + self.headroom_bytes

    @property
    def header(self) -> Path:
        return self.folder / f"model_{self.ident}.h"

    @property
    def source(self) -> Path:
        return self.folder / f"model_{self.ident}.cc"
