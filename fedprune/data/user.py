"""Your own labelled windows as a fedprune dataset: from numpy arrays, a mapping client ->
(x, y), a TFF ``ClientData``, or an ``.npz`` file.

Every entry point returns a :class:`~fedprune.data.windows.WindowedDataset`, the form the
built-in readers produce, so the same federated protocol applies to it
(:func:`fedprune.data.partition.partition_by_subject`: one client per id, the per-client,
per-class time-ordered 80/20 split, optional per-client standardization). Rows are taken in
the order given (or sorted by ``time`` within each client when a time index is given): that
order is what "time-ordered" means for your data.

Everything is checked on entry, each problem one :class:`~fedprune.errors.DataError` that
says what to fix and shows the offending value: non-finite values (with the first bad index),
windows without a time step or a channel, mismatched lengths, labels that are not integers
in ``[0, classes)``, client ids that are negative, fractional, or beyond int64 (a float
beyond 2^53, where neighbouring integers share one float, counts as beyond: such ids would
merge), ids that would turn into the same integer (``from_client_data``'s ``"01"`` and
``"1"``), an empty list of class names, names that are not UTF-8 text, and clients with
fewer windows than the split needs (``min_windows``). Client ids stay yours: nothing
renumbers integer ids.

Your data never takes on a built-in dataset's rules (WISDM's minimum of 10 windows per
client): a file is named by its file name with its ``.npz`` (``wisdm.npz``, never
``wisdm``), and ``name`` may not be a built-in dataset's name.

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

It is read by :func:`fedprune.runs.npz.read_arrays` (no pickle, so no code runs from a data
file; each array's declared shape checked against the bytes there and a 16 GiB cap before
anything is allocated); its SHA-256
(:func:`file_sha256`) goes into the run's configuration, so a run whose file changed is not
resumed with other data.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fedprune.data.windows import WindowedDataset
from fedprune.errors import DataError
from fedprune.runs.npz import NpzProblem, read_arrays

MIN_WINDOWS = 2
"""The fewest windows a client may have: one to train on and one to test on."""

NPZ_KEYS = ("x", "y", "client_id", "time", "class_names", "channel_names")
BUILTIN_NAMES = ("uci_har", "wisdm")
"""The built-in HAR datasets (:data:`fedprune.data.registry.DATASETS`), whose protocol rules
key on the dataset's name: your data may not take one of these names."""
LARGEST_ID = np.iinfo(np.int64).max
EXACT_FLOAT = 2**53
"""Whole numbers up to this are exact in a float64; beyond it, neighbours share a float."""


def _hint_layout(x: np.ndarray, y: np.ndarray, class_names: object, where: str) -> None:
    """One ``fedprune: note:`` line each for two layouts that are valid but usually a slip:
    windows with fewer time steps than channels (channels-first (N, C, T) arrays), and labels
    1..K with no class 0 and no class names (the model would get a class no window has)."""
    if x.shape[1] < x.shape[2]:
        print(
            f"fedprune: note: {where}x has {x.shape[1]} time steps of {x.shape[2]} channels; "
            "if your windows are channels-first (N, C, T), pass x.transpose(0, 2, 1)",
            file=sys.stderr,
        )
    if class_names is None and len(y) and y.min() == 1:
        print(
            f"fedprune: note: {where}no window has label 0, so class 0 has no data; if your "
            "labels run 1..K, pass y - 1 (or class_names with a name for class 0)",
            file=sys.stderr,
        )


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
    if name in BUILTIN_NAMES:
        raise DataError(
            f"name {name!r} is a built-in dataset's, whose protocol rules would apply to your "
            "data; give your data another name"
        )
    x = _samples(
        x, ("windows", "time steps", "channels"), where, "reshape a single-channel series to "
        "(N, T, 1)"
    )  # fmt: skip
    n = len(x)
    y = _integers(y, "y", n, where, negative=True)  # the class range check follows
    client_ids = _integers(client_ids, "client_id", n, where)
    _hint_layout(x, y, class_names, where)
    if class_names is None:
        class_names = tuple(f"class{k}" for k in range(implied_classes(y, n, where)))
    class_names = text_names(class_names, "class_names", where)
    if not class_names:
        raise DataError(f"{where}class_names is empty; give one name per class")
    bad = np.flatnonzero((y < 0) | (y >= len(class_names)))
    if len(bad):
        raise DataError(
            f"{where}y[{bad[0]}] = {y[bad[0]]} is not a class index in [0, {len(class_names)}) "
            f"({len(bad)} such labels); labels must be 0..{len(class_names) - 1}, one per "
            "class name"
        )
    if channel_names is None:
        channel_names = tuple(f"ch{c}" for c in range(x.shape[2]))
    channel_names = text_names(channel_names, "channel_names", where)
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
        _check_client_key(client)
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


def _check_client_key(client: Any) -> None:  # noqa: ANN401
    """A key of :func:`from_clients` is a whole number in ``[0, 2^63)`` (a float: at most
    2^53, beyond which neighbouring ids share one float)."""
    whole = isinstance(client, int | np.integer) and not isinstance(client, bool | np.bool_)
    if isinstance(client, float | np.floating) and np.isfinite(client):
        whole = float(client).is_integer() and abs(client) <= EXACT_FLOAT
    if not whole or not 0 <= int(client) <= LARGEST_ID:
        raise DataError(
            f"client id {client!r} is not a whole number in 0..{LARGEST_ID}; key the clients "
            "by their integer ids"
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
    with the window under ``x_key`` and its label under ``y_key``. Client ids are read by
    :func:`client_numbers`: integers written in ASCII digits keep their value, names
    (``"alice"``) are numbered 0, 1, ... in ``client_data.client_ids`` order."""
    ids = list(client_data.client_ids)
    clients = {}
    for number, client in zip(client_numbers(ids), ids):
        elements = list(client_data.create_tf_dataset_for_client(client).as_numpy_iterator())
        if elements and not all(x_key in e and y_key in e for e in elements[:1]):
            raise DataError(
                f"client {client}'s elements have keys {sorted(elements[0])}; pass x_key and "
                "y_key naming the window and the label"
            )
        shapes = {np.shape(e[x_key]) for e in elements}
        if len(shapes) > 1:
            raise DataError(f"client {client}'s windows differ in shape: {sorted(shapes)}")
        x = np.stack([e[x_key] for e in elements]) if elements else np.zeros((0,))
        y = np.array([e[y_key] for e in elements])
        if x.ndim == 2:  # a single-channel series per element
            x = x[..., None]
        clients[number] = (x, y)
    return from_clients(
        clients,
        class_names=class_names,
        channel_names=channel_names,
        name=name,
        min_windows=min_windows,
    )


def client_numbers(ids: Sequence[Any]) -> list[int]:
    """The integer of each client id of a ``ClientData`` (strings), in order.

    Ids that are all whole numbers written in ASCII digits (``"7"``, ``"0042"``) keep their
    value; ids that are all names (``"alice"``, ``"user_3"``) are numbered 0, 1, ... in the
    order given. Refused, each one :class:`DataError` naming the id: a negative id, one
    beyond int64, two ids of the same value (``"01"`` and ``"1"``, ``"-0"`` and ``"0"``),
    an id that reads as a number but not in ASCII digits (``"١"``, ``"²"``, ``"--1"``,
    ``"1e3"``, ``"1.5"``), and numbers mixed with names (which to renumber is not clear).
    """
    texts = [str(i) for i in ids]
    if len(set(texts)) != len(texts):
        twice = next(t for t in texts if texts.count(t) > 1)
        raise DataError(f"client id {twice!r} appears twice in client_ids")
    decimal = [re.fullmatch(r"-?[0-9]+", t) is not None for t in texts]
    if not all(decimal):
        odd = next((t for t, d in zip(texts, decimal) if not d and _number_like(t)), None)
        if odd is not None:
            raise DataError(
                f"client id {odd!r} reads as a number but is not a whole number in ASCII "
                "digits 0-9; write it as one (e.g. '1'), or name every client with a "
                "non-numeric name"
            )
        if any(decimal):
            first = texts[decimal.index(True)]
            raise DataError(
                f"client ids mix numbers ({first!r}) and names "
                f"({texts[decimal.index(False)]!r}); use numbers for every client or names "
                "for every client"
            )
        return list(range(len(texts)))
    numbers, seen = [], {}
    for text in texts:
        value = int(text)
        if value < 0:
            raise DataError(f"client id {text!r} is negative; client ids are 0, 1, 2, ...")
        if value > LARGEST_ID:
            raise DataError(
                f"client id {text!r} is beyond the largest client id {LARGEST_ID} (int64)"
            )
        if value in seen:
            raise DataError(
                f"client ids {seen[value]!r} and {text!r} are both client {value}; give "
                "each client its own number"
            )
        seen[value] = text
        numbers.append(value)
    return numbers


def _number_like(text: str) -> bool:
    """Whether ``text`` reads as a number to Python or holds only digits and signs."""
    try:
        float(text)
        return True
    except ValueError:
        stripped = text.strip()
        return bool(stripped) and all(c.isnumeric() or c in "+-." for c in stripped)


def text_names(values: Any, key: str, where: str) -> tuple[str, ...]:  # noqa: ANN401
    """Names as text: ``bytes`` decoded as UTF-8 (else one DataError naming the entry),
    anything else as ``str`` (``0`` and ``"0"`` are one name); each name once (else one
    DataError listing them)."""
    names = []
    for i, value in enumerate(values):
        if isinstance(value, bytes | np.bytes_):
            try:
                value = bytes(value).decode("utf-8")
            except UnicodeDecodeError:
                raise DataError(
                    f"{where}{key}[{i}] = {bytes(value)!r} is not UTF-8 text; write the names "
                    "as str (numpy 'U' arrays) or UTF-8 bytes"
                ) from None
        names.append(str(value))
    if len(set(names)) != len(names):
        raise DataError(f"{where}{key} has duplicates: {names}")
    return tuple(names)


def implied_classes(y: np.ndarray, rows: int, where: str, key: str = "y") -> int:
    """``max(y) + 1``, the number of classes labels ``y`` imply without class names, which
    may not exceed the ``rows`` labelled (a label of 10^12 would make 10^12 names)."""
    classes = int(y.max()) + 1
    if classes > rows:
        at = int(np.argmax(y))
        raise DataError(
            f"{where}{key}[{at}] = {y[at]} implies {classes} classes (0..{classes - 1}) for "
            f"{rows} labels; number the classes 0..K-1, or give class_names"
        )
    return classes


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
        arrays = read_arrays(path)
    except (OSError, NpzProblem) as err:
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
    """The dataset in an ``.npz`` file with the keys of the module docstring, named by its
    file name (``mine.npz``: never a built-in dataset's name, whose rules would apply)."""
    path = Path(path)
    arrays = load_archive(path, NPZ_KEYS[:3], NPZ_KEYS[3:])
    names = {key: file_names(arrays, key, path) for key in ("class_names", "channel_names")}
    return from_arrays(
        arrays["x"],
        arrays["y"],
        arrays["client_id"],
        time=arrays.get("time"),
        name=path.name,
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


def file_names(arrays: Mapping[str, np.ndarray], key: str, path: Path) -> tuple[str, ...] | None:
    """The names under ``key`` of an archive's ``arrays`` (``None`` when absent): a 1-D array
    of text, ``bytes`` decoded as UTF-8 (:func:`text_names`)."""
    if key not in arrays:
        return None
    value = arrays[key]
    if value.ndim != 1 or value.dtype.kind not in "US":
        raise DataError(f"--dataset {path}: {key} must be a 1-D array of strings")
    return text_names(value, key, f"--dataset {path}: ")


def _samples(value: Any, axes: Sequence[str], where: str, hint: str = "") -> np.ndarray:  # noqa: ANN401
    """``x`` of your data: numbers with one axis per name in ``axes`` (samples first), at
    least one sample, every value finite; else one DataError naming the shape and ``hint``."""
    x = _numbers(value, "x", where)
    if x.ndim != len(axes):
        fix = f"; {hint}" if hint else ""
        raise DataError(f"{where}x must have shape ({', '.join(axes)}), got {x.shape}{fix}")
    if len(x) == 0:
        raise DataError(f"{where}x holds no {axes[0]}")
    empty = [axis for axis, size in zip(axes[1:], x.shape[1:]) if size == 0]
    if empty:
        raise DataError(
            f"{where}x has shape {x.shape}: no {empty[0]}; each of the {axes[0]} needs at "
            f"least one of each of {', '.join(axes[1:])}"
        )
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


def _integers(
    value: Any,  # noqa: ANN401
    key: str,
    n: int,
    where: str,
    unit: str = "window",
    negative: bool = False,
) -> np.ndarray:
    """``value`` as ``n`` int64 whole numbers, ``>= 0`` unless ``negative``; a fraction, a
    value beyond int64 (a float beyond 2^53: neighbouring ids would share it) or a negative
    one is one DataError naming its index and value. Nothing wraps or rounds."""
    array = _numbers(value, key, where)
    if array.shape != (n,):
        raise DataError(f"{where}{key} must have one value per {unit} ({n}), got {array.shape}")
    bad, problem = None, ""
    if array.dtype.kind == "f":
        _finite(array, key, where)
        fraction = np.flatnonzero(array != np.round(array))
        large = np.flatnonzero(np.abs(array) > EXACT_FLOAT)
        if len(fraction):
            bad, problem = fraction[0], "is not a whole number"
        elif len(large):
            bad, problem = large[0], "is beyond 2^53, where a float holds no exact whole number"
    elif array.dtype.kind == "u":
        large = np.flatnonzero(array > LARGEST_ID)
        if len(large):
            bad, problem = large[0], f"is beyond the largest int64 ({LARGEST_ID})"
    if bad is None and not negative:
        below = np.flatnonzero(array < 0)
        if len(below):
            bad, problem = below[0], "is negative"
    if bad is not None:
        allowed = "whole numbers" if negative else "whole numbers 0, 1, 2, ..."
        raise DataError(
            f"{where}{key}[{bad}] = {array[bad]!r} {problem}; {key} must hold {allowed} "
            "(stored as integers)"
        )
    return array.astype(np.int64)


def write_npz(data: WindowedDataset, path: str | os.PathLike) -> Path:
    """Write ``data`` as an ``.npz`` file :func:`read_npz` reads back the same (the windows
    in their order, which is the time order); returns the path. Written to a temporary name
    first, so an interrupted write (or a full disk) never leaves a partial file under
    ``path``, nor the temporary one (:func:`fedprune.runs.files.write_npz`)."""
    from fedprune.runs.files import write_npz as write_arrays

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
