"""Reading and writing fedprune's files safely: a missing or damaged file is one
:class:`~fedprune.errors.DataError` that names it and says what to do; writes are atomic
(a crash, an interrupt or a full disk leaves the old file or the new one, never half of one).

Every file fedprune writes goes through :func:`atomic_file` (or the ``write_*`` helpers built
on it): the bytes go to a new, uniquely named temporary file in the target's folder (so the
rename stays on one file system), which is renamed over the target once it is complete and
closed, and removed if anything fails. Temporary names start with ``.`` and end in
``.tmp<suffix>`` (``np.savez`` would append ``.npz`` to a name without it). The rename is not
``fsync``-ed: a power cut may lose the newest file, a failing process never tears one.
A folder of several files that vouch for each other (an export and its report) is made
whole by :func:`staged_folder`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import secrets
import shutil
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from fedprune.errors import DataError

RETRAIN = "re-run training to write it again"


def damaged(path: Path, err: BaseException, fix: str = RETRAIN) -> DataError:
    """The one-line error for a damaged file, with the reason in words."""
    text = str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)
    reason = " ".join(text.split()) or type(err).__name__
    if isinstance(err, zipfile.BadZipFile):
        reason = f"truncated or not an .npz archive: {reason}"
    elif isinstance(err, EOFError):
        reason = f"truncated: {reason}"
    elif isinstance(err, json.JSONDecodeError):
        reason = f"truncated or invalid JSON: {reason}"
    return DataError(f"{path} is damaged ({reason}); {fix}")


def _refuse_constant(name: str) -> float:
    raise ValueError(f"holds {name}, which is not JSON")


def read_json(path: Path, fix: str = RETRAIN) -> Any:
    """The content of a JSON file; ``NaN`` / ``Infinity`` (which Python's ``json`` writes
    unless told not to, but JSON has no such values) make it damaged."""
    try:
        return json.loads(Path(path).read_text(), parse_constant=_refuse_constant)
    except FileNotFoundError:
        raise DataError(f"{path} is missing; {fix}") from None
    except (ValueError, OSError) as err:  # JSONDecodeError, UnicodeDecodeError, a folder...
        raise damaged(Path(path), err, fix) from None


def read_json_object(path: Path, fix: str = RETRAIN) -> dict:
    """A JSON file that must hold an object."""
    value = read_json(path, fix)
    if not isinstance(value, dict):
        raise damaged(Path(path), ValueError("not a JSON object"), fix)
    return value


def write_json(path: Path, value: Mapping | list, sort_keys: bool = True) -> None:
    """``value`` as indented JSON. A NaN or infinite number in it is refused (a
    :class:`DataError` naming its place) rather than written as the non-JSON ``NaN``."""
    place = non_finite_json_place(value)
    if place is not None:
        raise DataError(
            f"refusing to write {path}: {place} is not a finite number, which JSON cannot hold"
        )
    text = json.dumps(value, indent=2, sort_keys=sort_keys, allow_nan=False)
    write_text(path, text + "\n")


def non_finite_json_place(value: Any, place: str = "the value") -> str | None:
    """Where a JSON-bound ``value`` holds a NaN or infinite float (``'avg_acc'``,
    ``'clients'[2]``...), or ``None``."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{place} ({value})"
    if isinstance(value, Mapping):
        items: Iterable = ((f"{k!r}", v) for k, v in value.items())
    elif isinstance(value, list | tuple):
        items = ((f"[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for key, item in items:
        inner = key if place == "the value" else f"{place}{'' if key[0] == '[' else '.'}{key}"
        found = non_finite_json_place(item, inner)
        if found is not None:
            return found
    return None


def write_text(path: Path, text: str) -> None:
    """``text`` (UTF-8) into ``path``, atomically (:func:`atomic_file`)."""
    write_bytes(path, text.encode())


def write_bytes(path: Path, content: bytes) -> None:
    """``content`` into ``path``, atomically (:func:`atomic_file`)."""
    with atomic_file(path) as f:
        f.write(content)


def write_figure(path: str | os.PathLike, figure: Any, dpi: int) -> None:
    """A matplotlib ``figure`` into ``path`` (its format from the suffix, PNG without one),
    atomically (:func:`atomic_file`)."""
    path = Path(path)
    with atomic_file(path) as f:
        figure.savefig(f, format=path.suffix.lstrip(".").lower() or "png", dpi=dpi)


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, text: bool = False) -> Iterator[IO]:
    """``with atomic_file(path) as f:`` ``f`` writes a new temporary file beside ``path``
    (binary; ``text=True``: UTF-8 text with ``newline=""``, as :mod:`csv` wants), renamed
    over ``path`` when the block ends, removed if it fails (an ``OSError`` such as a full
    disk, an exception, Ctrl-C). The file gets the usual mode (0666 less the umask); it is
    created ``O_EXCL | O_NOFOLLOW``, so a link planted under the temporary name is not
    followed."""
    path = Path(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp{path.suffix}")
        try:
            fd = os.open(tmp, flags, 0o666)
            break
        except FileExistsError:
            continue
    try:
        with open(fd, "w", encoding="utf-8", newline="") if text else open(fd, "wb") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


@contextlib.contextmanager
def staged_folder(
    folder: str | os.PathLike, replace: Sequence[str] = (), last: Sequence[str] = ()
) -> Iterator[Path]:
    """``with staged_folder(out) as stage:`` write the files into ``stage``, a new hidden
    folder inside ``folder``; when the block ends they are moved into ``folder`` (the names
    in ``last``, e.g. a report vouching for the others, after the rest), and when it fails
    ``stage`` is removed: ``folder`` then holds what it held before, never part of the new
    files beside a report of them. ``replace`` names entries of ``folder`` that the new
    files replace (an earlier export): they are moved away just before the new files go in,
    put back if moving those fails, and deleted after. Call it holding ``folder``'s lock
    (:class:`~fedprune.runs.lock.FolderLock`): what a killed earlier call left (``.staged-*``,
    ``.replaced-*``) is removed first."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for leftover in [*folder.glob(".staged-*"), *folder.glob(".replaced-*")]:
        shutil.rmtree(leftover, ignore_errors=True)
    stage = _new_hidden_folder(folder, "staged")
    try:
        yield stage
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    old = _new_hidden_folder(folder, "replaced") if replace else None
    moved_old: list[str] = []
    moved_new: list[str] = []
    try:
        for name in replace:
            if (folder / name).exists() or (folder / name).is_symlink():
                os.rename(folder / name, old / name)
                moved_old.append(name)
        names = [n for n in os.listdir(stage) if n not in last]
        for name in [*names, *(n for n in last if (stage / n).exists())]:
            os.rename(stage / name, folder / name)
            moved_new.append(name)
    except BaseException:
        for name in moved_new:  # undo: the old files back where they were
            with contextlib.suppress(OSError):
                os.rename(folder / name, stage / name)
        for name in moved_old:
            with contextlib.suppress(OSError):
                os.rename(old / name, folder / name)
        shutil.rmtree(stage, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        raise
    stage.rmdir()
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _new_hidden_folder(parent: Path, what: str) -> Path:
    while True:
        path = parent / f".{what}-{secrets.token_hex(4)}"
        try:
            path.mkdir(mode=0o700)
            return path
        except FileExistsError:
            continue


def read_npz(path: Path, fix: str = RETRAIN) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` archive, read now (a damaged member fails here, not later)
    by :func:`fedprune.runs.npz.read_arrays`: no pickle, each declared shape checked against
    the bytes there and a cap before anything is allocated, a ``.npy`` under an ``.npz`` name
    named as such."""
    from fedprune.runs.npz import read_arrays

    try:
        return read_arrays(path)
    except FileNotFoundError:
        raise DataError(f"{path} is missing; {fix}") from None
    except (OSError, ValueError) as err:  # NpzProblem is a ValueError
        raise damaged(Path(path), err, fix) from None


def non_finite_place(
    arrays: Mapping[str, Sequence[np.ndarray]], scalars: Mapping[str, float] | None = None
) -> str | None:
    """Where named array lists (and scalars) hold nan or inf, e.g. ``'w' array 0: 3 values``,
    or ``None``; arrays of other kinds (integers, text) are finite by nature."""
    for name, seq in arrays.items():
        for i, array in enumerate(seq):
            if np.asarray(array).dtype.kind in "fc":
                count = int(np.size(array) - np.count_nonzero(np.isfinite(array)))
                if count:
                    return f"{name!r} array {i}: {count} value{'s' if count > 1 else ''}"
    for name, value in (scalars or {}).items():
        if not np.isfinite(value):
            return f"scalar {name!r} is {value}"
    return None


def write_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """``arrays`` as an uncompressed ``.npz`` in ``path``, atomically (:func:`atomic_file`).

    The archive is what ``np.savez`` writes (one ``NAME.npy`` member per array, zip64), but
    built here so that a failing write (a full disk) closes it at once: ``np.savez`` leaves its
    ``ZipFile`` open, whose finalizer later prints "Exception ignored ... seek of closed file".
    Object arrays are refused (nothing of fedprune reads pickles).

    Whatever stops the write (a full disk, Ctrl-C landing anywhere, even inside ``zipfile``
    between marking a member open and returning it), the archive lets go of the temporary
    file before :func:`atomic_file` closes and removes it: a ``ZipFile`` that still held it
    would try to finish the archive from its finalizer, at exit, into the closed file."""
    with atomic_file(path) as f:
        archive = zipfile.ZipFile(f, mode="w", allowZip64=True)
        try:
            for name, value in arrays.items():
                with archive.open(f"{name}.npy", mode="w", force_zip64=True) as member:
                    np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)
            archive.close()
        finally:
            archive.fp = None  # closed above, or abandoned with the temporary file


def numbered_groups(
    path: Path, arrays: Mapping[str, np.ndarray], pattern: str
) -> dict[int, list[np.ndarray]]:
    """``{group: [arrays of that group, in index order]}`` for keys ``pattern`` matches with
    two numbers (group, index); another key or a gap in the numbering is a damaged file."""
    groups: dict[int, dict[int, np.ndarray]] = {}
    for key, value in arrays.items():
        match = re.fullmatch(pattern, key)
        if match is None:
            raise damaged(path, ValueError(f"unexpected array {key!r}"))
        groups.setdefault(int(match[1]), {})[int(match[2])] = value
    result = {}
    for group, members in sorted(groups.items()):
        if sorted(members) != list(range(len(members))):
            raise damaged(path, ValueError(f"the arrays of {group} are not numbered 0..n-1"))
        result[group] = [members[i] for i in range(len(members))]
    return result


def numbered_arrays(groups: Mapping[int, list[np.ndarray]], prefix: str) -> dict[str, np.ndarray]:
    """The inverse of :func:`numbered_groups`: ``{f"{prefix}{group}_{i}": array}``."""
    return {
        f"{prefix}{g}_{i}": np.asarray(a) for g, seq in groups.items() for i, a in enumerate(seq)
    }
