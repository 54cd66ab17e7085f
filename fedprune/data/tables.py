"""Your own objects as a federated table, for the one-shot clustering methods (Fed-HIRE, k-FED,
federated k-means): from numpy arrays, or an ``.npz`` file.

A table holds N objects of d features, the client of each, and optionally each object's class.
The classes are ground truth for the scores only (Purity, ARI, NMI, ACC): no clusterer sees
them, and without them a run clusters all the same and reports no scores. The table is
clustered as given (the built-in UCI tables are z-scored per feature first; scale yours as
you see fit).

The ``.npz`` file (``fedprune train fedhire --dataset path/to/table.npz``) holds ``x`` (N, d)
numbers, ``client_id`` (N,) integers and optionally ``y`` (N,) integer classes. It is read
with ``allow_pickle=False``, and its SHA-256 is recorded in the run's configuration.

Checked on entry, each a :class:`~fedprune.errors.DataError` that says what to fix: a table
that is not 2-D, non-finite values, mismatched lengths, negative or fractional classes or
client ids, ids or classes beyond int64 (floats beyond 2^53), objects without a feature,
and clients with fewer than 2 objects (:func:`fedprune.data.user.from_arrays` checks ids and
classes the same way, with the offending value).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import numpy as np

from fedprune.data.user import _integers, _samples, load_archive
from fedprune.errors import DataError

MIN_OBJECTS = 2
"""The fewest objects a client may hold (a clustering of one object says nothing)."""


@dataclasses.dataclass(frozen=True)
class ClientTable:
    """N objects (rows of ``x``, float64 (N, d)), the client of each (``client``, int64),
    and optionally their classes (``y``, int64, or ``None``); ``name`` names it in reports."""

    name: str
    x: np.ndarray
    client: np.ndarray
    y: np.ndarray | None = None

    @property
    def clients(self) -> np.ndarray:
        """The distinct client ids, ascending (the order of the federation's clients)."""
        return np.unique(self.client)

    def client_x(self) -> list[np.ndarray]:
        return [self.x[self.client == c] for c in self.clients]

    def client_y(self) -> list[np.ndarray] | None:
        return None if self.y is None else [self.y[self.client == c] for c in self.clients]


def from_table(
    x: Any,  # noqa: ANN401 (array-like)
    client_ids: Any,  # noqa: ANN401
    y: Any = None,  # noqa: ANN401
    *,
    name: str = "user",
    source: str = "",
) -> ClientTable:
    """A federated table of objects ``x`` (N, d) held by ``client_ids`` (N,), with optional
    classes ``y`` (N,) for the scores.

    Parameters
    ----------
    x : array-like
        N objects of d numeric features.
    client_ids : array-like
        The client (an integer) of each object.
    y : array-like, optional
        Each object's class (integers >= 0), used only to score the clustering.
    name : str
        The table's name in reports.
    source : str
        Where the arrays came from (a file), named in error messages.

    Raises
    ------
    DataError
        One line naming the problem and what to fix.
    """
    where = f"{source}: " if source else ""
    x = _samples(x, ("objects", "features"), where)
    n = len(x)
    client = _integers(client_ids, "client_id", n, where, "object")
    if y is not None:
        y = _integers(y, "y", n, where, "object")
    ids, counts = np.unique(client, return_counts=True)
    small = ids[counts < MIN_OBJECTS]
    if len(small):
        raise DataError(
            f"{where}client {small[0]} holds {counts[counts < MIN_OBJECTS][0]} object(s), fewer "
            f"than {MIN_OBJECTS} ({len(small)} such clients); give each client at least "
            f"{MIN_OBJECTS} objects or leave those clients out"
        )
    return ClientTable(name, x.astype(np.float64), client, y)


def read_table_npz(path: str | os.PathLike) -> ClientTable:
    """The table in an ``.npz`` file with the keys of the module docstring."""
    path = Path(path)
    arrays = load_archive(path, ("x", "client_id"), ("y",))
    return from_table(
        arrays["x"], arrays["client_id"], arrays.get("y"), name=path.stem, source=str(path)
    )


def write_table_npz(table: ClientTable, path: str | os.PathLike) -> Path:
    """Write ``table`` as an ``.npz`` file :func:`read_table_npz` reads back the same
    (atomically: :func:`fedprune.runs.files.write_npz`)."""
    from fedprune.runs.files import write_npz

    path = Path(path)
    arrays = {"x": table.x, "client_id": table.client}
    if table.y is not None:
        arrays["y"] = table.y
    write_npz(path, arrays)
    return path
