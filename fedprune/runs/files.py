"""Reading and writing a run's files safely: a missing or damaged file is one
:class:`~fedprune.errors.DataError` that names it and says what to do; writes are atomic
(a crash leaves the old file or the new one, never half of one)."""

from __future__ import annotations

import json
import os
import re
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

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


def read_json(path: Path, fix: str = RETRAIN) -> Any:
    """The content of a JSON file."""
    try:
        return json.loads(Path(path).read_text())
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


def write_json(path: Path, value: Mapping | list) -> None:
    write_text(path, json.dumps(value, indent=2, sort_keys=True) + "\n")


def write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def read_npz(path: Path, fix: str = RETRAIN) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` archive, read now (a damaged member fails here, not later)."""
    try:
        with open(path, "rb") as f:
            if f.read(2) != b"PK":  # np.load would try it as .npy or pickle
                raise ValueError("not an .npz archive")
        archive = np.load(path, allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):
            raise ValueError("a single .npy array, not an .npz archive")
        with archive:
            return {key: archive[key] for key in archive.files}
    except FileNotFoundError:
        raise DataError(f"{path} is missing; {fix}") from None
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError) as err:
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
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


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
