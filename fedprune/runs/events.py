"""TensorBoard event files of a run, written from its ``metrics.csv`` rows.

Every row a run appends to ``metrics.csv`` is also written to an event file under
``<run>/tensorboard/``, so ``tensorboard --logdir runs/`` shows every method's runs, live:

* the step is the row's round (column ``round``), iteration (``iteration``) or ``step``;
* every numeric column becomes a scalar under its own name (``train_loss``, ``acc``,
  ``sparsity``, ``comm_mb_payload``, ``clusters``, ``ari``, ...). A row of one cluster (column
  ``cluster`` >= 0) goes under ``cluster_<c>/<column>``, the row of all clients
  (``cluster`` -1) under the plain name; text columns (``phase``) and empty cells are left
  out;
* where rows carry a ``cluster`` column but no ``clusters`` one, the number of clusters
  trained in the round is written as ``clusters``;
* :meth:`EventLog.histogram` adds distributions (the personal accuracies after each
  fine-tuning length).

The event files are a view of ``metrics.csv``. When a run resumes, the rows of rounds its
checkpoint does not cover are dropped from ``metrics.csv`` (:meth:`RunDir.truncate_metrics`)
and the event files are written again from the rows kept: every step appears once, however
often the run was interrupted. A TensorBoard already open on the run shows the rewritten file
after its next reload.

Written with TensorBoard's own record format and summary protos (the ``tensorboard`` package
that TensorFlow installs), without TensorFlow: appending a row costs microseconds.
"""

from __future__ import annotations

import math
import os
import socket
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

EVENTS_DIR = "tensorboard"
STEP_COLUMNS = ("round", "iteration", "step")
_PREFIX = "events.out.tfevents."


def step_column(row: Mapping) -> str | None:
    """The column of ``row`` that numbers its step, or ``None``."""
    return next((key for key in STEP_COLUMNS if key in row), None)


def _number(value: object) -> float | None:
    """``value`` as a float where it is a number (or a string of one), else ``None``."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float | np.integer | np.floating):
        return float(value)
    if isinstance(value, str) and value.strip():
        try:
            return float(value)
        except ValueError:
            return None
    return None


def scalars_of(row: Mapping) -> tuple[int, dict[str, float]] | None:
    """(step, {tag: value}) of one metrics row, ``None`` for a row without a step."""
    key = step_column(row)
    step = _number(row.get(key)) if key else None
    if step is None:
        return None
    cluster = _number(row.get("cluster"))
    prefix = f"cluster_{int(cluster)}/" if cluster is not None and cluster >= 0 else ""
    tags = {}
    for column, value in row.items():
        if column in STEP_COLUMNS or column == "cluster":
            continue
        number = _number(value)
        if number is not None:
            tags[prefix + column] = number
    return int(step), tags


class EventLog:
    """The event files of one run directory (see the module text)."""

    def __init__(self, run_path: str | os.PathLike):
        self.folder = Path(run_path) / EVENTS_DIR
        self._file: Path | None = None
        self._step: int | None = None  # the step whose cluster rows are being counted
        self._clusters: set[int] = set()
        self._counts_clusters = False

    # --- writing -------------------------------------------------------------------------
    def add_row(self, row: Mapping) -> None:
        """Write one metrics row's scalars (and, when its step ends, the cluster count)."""
        parsed = scalars_of(row)
        if parsed is None:
            return
        step, tags = parsed
        if step != self._step:
            self.end_step()
            self._step = step
        if "cluster" in row and "clusters" not in row:
            self._counts_clusters = True
            cluster = _number(row.get("cluster"))
            if cluster is not None and cluster >= 0:
                self._clusters.add(int(cluster))
        self._write(self._scalar_events(step, tags))

    def end_step(self) -> None:
        """Write the cluster count of the step whose rows were added last (once)."""
        if self._step is not None and self._counts_clusters:
            count = max(len(self._clusters), 1)  # rows of all clients only: one model
            self._write(self._scalar_events(self._step, {"clusters": float(count)}))
        self._step, self._clusters, self._counts_clusters = None, set(), False

    def histogram(self, tag: str, values: Sequence[float], step: int) -> None:
        """A distribution of ``values`` at ``step`` (e.g. the clients' personal accuracies)."""
        from tensorboard.plugins.histogram.summary import histogram_pb

        values = np.asarray(values, dtype=np.float64)
        if values.size == 0:
            return
        self._write([self._event(step, histogram_pb(tag, values))])

    def rebuild(self, rows: Iterable[Mapping]) -> None:
        """Replace the event files by ones holding exactly ``rows`` (the rows kept on resume)."""
        if self.folder.exists():
            for old in self.folder.glob(_PREFIX + "*"):
                old.unlink()
        self._file = None
        self._step, self._clusters, self._counts_clusters = None, set(), False
        for row in rows:
            self.add_row(row)
        self.end_step()

    # --- records -------------------------------------------------------------------------
    def _scalar_events(self, step: int, tags: Mapping[str, float]) -> list:
        from tensorboard.plugins.scalar.summary import scalar_pb

        return [
            self._event(step, scalar_pb(tag, value))
            for tag, value in tags.items()
            if not math.isnan(value)
        ]

    @staticmethod
    def _event(step: int, summary: object) -> object:
        from tensorboard.compat.proto import event_pb2

        return event_pb2.Event(wall_time=time.time(), step=int(step), summary=summary)

    def _write(self, events: Sequence[object]) -> None:
        if not events:
            return
        from tensorboard.compat.proto import event_pb2
        from tensorboard.summary.writer.record_writer import RecordWriter

        if self._file is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            existing = sorted(self.folder.glob(_PREFIX + "*"))
            if existing:
                self._file = existing[-1]
            else:
                self._file = self.folder / f"{_PREFIX}{int(time.time())}.{socket.gethostname()}"
                header = event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2")
                events = [header, *events]
        with open(self._file, "ab") as f:
            writer = RecordWriter(f)
            for event in events:
                writer.write(event.SerializeToString())


def read_scalars(run_path: str | os.PathLike) -> dict[str, list[tuple[int, float]]]:
    """Every scalar in a run's event files: tag -> [(step, value), ...] in file order (for
    tests and ``fedprune plot``); no TensorFlow needed."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    out: dict[str, list[tuple[int, float]]] = {}
    folder = Path(run_path) / EVENTS_DIR
    for file in sorted(folder.glob(_PREFIX + "*")):
        for event in EventFileLoader(str(file)).Load():
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name != "scalars":
                    continue
                number = float(tensor_util.make_ndarray(value.tensor))
                out.setdefault(value.tag, []).append((event.step, number))
    return out


def read_tags(run_path: str | os.PathLike) -> dict[str, list[int]]:
    """Every tag in a run's event files (scalars and histograms): tag -> its steps in file
    order; no TensorFlow needed."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    out: dict[str, list[int]] = {}
    for file in sorted((Path(run_path) / EVENTS_DIR).glob(_PREFIX + "*")):
        for event in EventFileLoader(str(file)).Load():
            for value in event.summary.value:
                out.setdefault(value.tag, []).append(event.step)
    return out
