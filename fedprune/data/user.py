"""Your own labelled windows as a fedprune dataset: from numpy arrays, a mapping client ->
(x, y), a TFF ``ClientData``, or an ``.npz`` file.

Every entry point returns a :class:`~fedprune.data.windows.WindowedDataset`, the form the
built-in readers produce, so the same federated protocol applies to it
(:func:`fedprune.data.partition.partition_by_subject`: one client per id, the per-client,
per-class time-ordered 80/20 split, optional per-client standardization). Rows are taken in
the order given (or sorted by ``time`` within each client when a time index is given): that
order is what "time-ordered" means for your data.

Everything is checked on entry, each problem one :class:`~fedprune.errors.DataError` that
says what to fix: non-finite values (with the first bad index), mismatched lengths, labels
that are not integers in ``[0, classes)``, an empty list of class names, and clients with
fewer windows than the split needs (``min_windows``).

The ``.npz`` file (``fedprune train caafp --dataset path/to/data.npz``) holds:

============== ================= ==========================================================
key            shape, type       meaning
============== ================= ==========================================================
``x``          (N, T, C) float   N windows of T time steps and C channels
``y``          (N,) int          class index in ``[0, classes)``
``client_id``  (N,) int          the client (user, device) that recorded the window
``time``       (N,) number       optional: order of the windows within a client
``class_names`` (K,) str         optional: one name per class (default ``class0``...)
``channel_names`` (C,) str       optional: one name per channel (default ``ch0``...)
============== ================= ==========================================================

It is read with ``allow_pickle=False`` (no code runs from a data file); its SHA-256
(:func:`file_sha256`) goes into the run's configuration, so a run whose file changed is not
resumed with other data.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fedprune.data.windows import WindowedDataset
from fedprune.errors import DataError

MIN_WINDOWS = 2
"""The fewest windows a client may have: one to train on and one to test on."""

NPZ_KEYS = ("x", "y", "client_id", "time", "class_names", "channel_names")


def from_arrays(
    x: Any,
    y: Any,
    client_ids: Any,
    *,
    time: Any = None,
    class_names: Sequence[str] | None = None,
    channel_names: Sequence[str] | None = None,
    name: str = "user",
    min_windows: int = MIN_WINDOWS,
    source: str = "",
) -> WindowedDataset:
    """A dataset of windows ``x`` (N, T, C), labels ``y`` (N,) and their clients (N,).

    Parameters
    ----------
    x, y, client_ids : array-like
        The windows, their class indices and the id (an integer) of the client of each.
    time : array-like, optional
        A number per window that orders a client's windows in time; without it the given
        order is the time order.
    class_names, channel_names : sequence of str, optional
        Default: ``class0..`` for ``max(y) + 1`` classes, ``ch0..`` for C channels.
    name : str
        The dataset's name in reports and file names.
    min_windows : int
        The fewest windows a client may have (at least 2: the split needs a test window).
    source : str
        Where the arrays came from (a file), named in error messages.

    Raises
    ------
    DataError
        One line naming the problem and what to fix.
    """
    where = f"{source}: " if source else ""
    x = _samples(
        x, ("windows", "time steps", "channels"), where, "reshape a single-channel series to "
        "(N, T, 1)"
    )  # fmt: skip
    n = len(x)
    y = _integers(y, "y", n, where)
    client_ids = _integers(client_ids, "client_id", n, where)
    if class_names is None:
        class_names = tuple(f"class{k}" for k in range(int(y.max()) + 1))
    class_names = tuple(str(c) for c in class_names)
    if not class_names:
        raise DataError(f"{where}class_names is empty; give one name per class")
    if len(set(class_names)) != len(class_names):
        raise DataError(f"{where}class_names has duplicates: {list(class_names)}")
    bad = np.flatnonzero((y < 0) | (y >= len(class_names)))
    if len(bad):
        raise DataError(
            f"{where}y[{bad[0]}] = {y[bad[0]]} is not a class index in [0, {len(class_names)}) "
            f"({len(bad)} such labels); labels must be 0..{len(class_names) - 1}, one per "
            "class name"
        )
    if channel_names is None:
        channel_names = tuple(f"ch{c}" for c in range(x.shape[2]))
    channel_names = tuple(str(c) for c in channel_names)
    if len(channel_names) != x.shape[2]:
        raise DataError(
            f"{where}channel_names has {len(channel_names)} names for {x.shape[2]} channels"
        )
    order = np.arange(n)
    if time is not None:
        time = _numbers(time, "time", where)
        if time.shape != (n,):
            raise DataError(f"{where}time must have one value per window ({n}), got {time.shape}")
        _finite(time, "time", where)
        order = np.lexsort((np.arange(n), time))  # stable: ties keep the given order
    if min_windows < MIN_WINDOWS:
        raise DataError(f"min_windows must be at least {MIN_WINDOWS}, got {min_windows}")
    ids, counts = np.unique(client_ids, return_counts=True)
    small = ids[counts < min_windows]
    if len(small):
        count = int(counts[counts < min_windows][0])
        raise DataError(
            f"{where}client {small[0]} has {count} window(s), fewer than the {min_windows} "
            f"the split needs ({len(small)} such clients); give each client at least "
            f"{min_windows} windows or leave those clients out"
        )
    for client in ids:  # the split keeps a class of one window for training
        if np.bincount(y[client_ids == client]).max() < 2:
            raise DataError(
                f"{where}client {client} has no class with 2 or more windows, so the "
                "per-class split leaves it no test window; give it more windows or leave it out"
            )
    return WindowedDataset(
        name=name,
        x=np.ascontiguousarray(x[order], dtype=np.float32),
        y=y[order].astype(np.int64),
        subject=client_ids[order].astype(np.int64),
        class_names=class_names,
        channel_names=channel_names,
    )


def from_clients(
    clients: Mapping[int, tuple[Any, Any]],
    *,
    class_names: Sequence[str] | None = None,
    channel_names: Sequence[str] | None = None,
    name: str = "user",
    min_windows: int = MIN_WINDOWS,
) -> WindowedDataset:
    """A dataset from ``{client id: (x, y)}``, each client's windows in time order."""
    if not clients:
        raise DataError("no clients given; pass {client id: (x, y)} with at least one client")
    xs, ys, ids = [], [], []
    for client, pair in clients.items():
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise DataError(f"client {client}: expected a pair (x, y)")
        x, y = np.asarray(pair[0]), np.asarray(pair[1])
        if len(x) != len(y):
            raise DataError(f"client {client}: x has {len(x)} windows but y has {len(y)} labels")
        xs.append(x)
        ys.append(y)
        ids.append(np.full(len(y), client))
    shapes = {x.shape[1:] for x in xs}
    if len(shapes) != 1:
        raise DataError(f"the clients' windows differ in shape: {sorted(map(str, shapes))}")
    return from_arrays(
        np.concatenate(xs),
        np.concatenate(ys),
        np.concatenate(ids),
        class_names=class_names,
        channel_names=channel_names,
        name=name,
        min_windows=min_windows,
    )


def from_client_data(
    client_data: Any,
    *,
    x_key: str = "x",
    y_key: str = "y",
    class_names: Sequence[str] | None = None,
    channel_names: Sequence[str] | None = None,
    name: str = "user",
    min_windows: int = MIN_WINDOWS,
) -> WindowedDataset:
    """A dataset from a ``tff.simulation.datasets.ClientData`` whose elements are mappings
    with the window under ``x_key`` and its label under ``y_key``. Client ids that are not
    integers are numbered 0, 1, ... in ``client_data.client_ids`` order."""
    ids = list(client_data.client_ids)
    numeric = all(str(i).lstrip("-").isdigit() for i in ids)
    clients = {}
    for number, client in enumerate(ids):
        elements = list(client_data.create_tf_dataset_for_client(client).as_numpy_iterator())
        if elements and not all(x_key in e and y_key in e for e in elements[:1]):
            raise DataError(
                f"client {client}'s elements have keys {sorted(elements[0])}; pass x_key and "
                "y_key naming the window and the label"
            )
        x = np.stack([e[x_key] for e in elements]) if elements else np.zeros((0,))
        y = np.array([e[y_key] for e in elements])
        if x.ndim == 2:  # a single-channel series per element
            x = x[..., None]
        clients[int(client) if numeric else number] = (x, y)
    return from_clients(
        clients,
        class_names=class_names,
        channel_names=channel_names,
        name=name,
        min_windows=min_windows,
    )


def load_archive(
    path: str | os.PathLike, required: Sequence[str], optional: Sequence[str]
) -> dict[str, np.ndarray]:
    """The arrays of your ``.npz`` file ``path`` (read without pickle), which must hold the
    ``required`` keys and no keys beyond ``optional``; a missing or unreadable file, or
    other keys, is one :class:`DataError` naming the file and the keys it needs."""
    path = Path(path)
    keys = f"{', '.join(required)} and optionally {', '.join(optional)}"
    if not path.is_file():
        raise DataError(f"--dataset {path}: no such file; give the path of your .npz file")
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        reason = " ".join(str(err).split()) or type(err).__name__
        raise DataError(
            f"--dataset {path} is not a readable .npz archive ({reason}); write it with "
            f"numpy.savez(path, ...) with the keys {keys}"
        ) from None
    missing = [key for key in required if key not in arrays]
    unknown = sorted(set(arrays) - set(required) - set(optional))
    if missing or unknown:
        problem = f"lacks {', '.join(missing)}" if missing else f"has unknown keys {unknown}"
        raise DataError(f"--dataset {path} {problem}; its keys must be {keys}")
    return arrays


def read_npz(path: str | os.PathLike, min_windows: int = MIN_WINDOWS) -> WindowedDataset:
    """The dataset in an ``.npz`` file with the keys of the module docstring."""
    path = Path(path)
    arrays = load_archive(path, NPZ_KEYS[:3], NPZ_KEYS[3:])
    names = {key: _names(arrays, key, path) for key in ("class_names", "channel_names")}
    return from_arrays(
        arrays["x"],
        arrays["y"],
        arrays["client_id"],
        time=arrays.get("time"),
        name=path.stem,
        min_windows=min_windows,
        source=str(path),
        **names,
    )


def file_sha256(path: str | os.PathLike) -> str:
    """The hex SHA-256 of a file's bytes (a missing or unreadable file is a DataError)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError as err:
        raise DataError(
            f"--dataset {path}: cannot read it ({err.strerror or err}); give the path of your "
            ".npz file"
        ) from None
    return digest.hexdigest()


def _names(arrays: Mapping[str, np.ndarray], key: str, path: Path) -> tuple[str, ...] | None:
    if key not in arrays:
        return None
    value = arrays[key]
    if value.ndim != 1 or value.dtype.kind not in "US":
        raise DataError(f"--dataset {path}: {key} must be a 1-D array of strings")
    return tuple(v.decode() if isinstance(v, bytes) else str(v) for v in value)


def _samples(value: Any, axes: Sequence[str], where: str, hint: str = "") -> np.ndarray:  # noqa: ANN401
    """``x`` of your data: numbers with one axis per name in ``axes`` (samples first), at
    least one sample, every value finite; else one DataError naming the shape and ``hint``."""
    x = _numbers(value, "x", where)
    if x.ndim != len(axes):
        fix = f"; {hint}" if hint else ""
        raise DataError(f"{where}x must have shape ({', '.join(axes)}), got {x.shape}{fix}")
    if len(x) == 0:
        raise DataError(f"{where}x holds no {axes[0]}")
    _finite(x, "x", where)
    return x


def _numbers(value: Any, key: str, where: str) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise DataError(f"{where}{key} must hold numbers, got dtype {array.dtype}")
    return array


def _finite(array: np.ndarray, key: str, where: str) -> None:
    with np.errstate(over="ignore"):
        finite = np.isfinite(array.astype(np.float32)) if array.dtype.kind == "f" else None
    if finite is not None and not finite.all():
        bad = np.argwhere(~finite)[0]
        index = ", ".join(map(str, bad))
        raise DataError(
            f"{where}{key}[{index}] = {array[tuple(bad)]!r} is not a finite float32 number "
            f"({int((~finite).sum())} such values); remove or repair those windows"
        )


def _integers(value: Any, key: str, n: int, where: str, unit: str = "window") -> np.ndarray:  # noqa: ANN401
    array = _numbers(value, key, where)
    if array.shape != (n,):
        raise DataError(f"{where}{key} must have one value per {unit} ({n}), got {array.shape}")
    if array.dtype.kind == "f":
        _finite(array, key, where)
        if not np.all(array == np.round(array)):
            raise DataError(f"{where}{key} must hold whole numbers")
    return array.astype(np.int64)


def write_npz(data: WindowedDataset, path: str | os.PathLike) -> Path:
    """Write ``data`` as an ``.npz`` file :func:`read_npz` reads back the same (the windows
    in their order, which is the time order); returns the path. Written to a temporary name
    first, so an interrupted write (or a full disk) never leaves a partial file under
    ``path``, nor the temporary one (:func:`fedprune.runs.files.write_npz`)."""
    from fedprune.runs.files import write_npz as write_arrays  # runs imports data: not above

    path = Path(path)
    write_arrays(
        path,
        {
            "x": data.x,
            "y": data.y,
            "client_id": data.subject,
            "class_names": np.array(data.class_names),
            "channel_names": np.array(data.channel_names),
        },
    )
    return path
