"""A cache of parsed windows: one ``.npz`` per (source file, preprocessing parameters).

Parsing the text files takes seconds; loading the cache takes milliseconds. The key hashes the
source file's resolved path, size and modification time, the reader's parameters and
:data:`FORMAT`, so a changed file or parameter never returns stale arrays. Files are loaded
with ``allow_pickle=False``.

An entry is trusted only after :func:`load` has checked everything it holds (see
:func:`check_arrays`): a truncated or damaged file (a full disk, a killed process, a bad CRC)
must not break every later command, nor feed NaN or misshapen arrays to training. An entry
that fails is deleted and reported in one ``fedprune: note:`` line on stderr, and the caller
re-parses the source, which always holds the same information; so a bad entry costs one
re-parse and is never an error. Entries are written to a unique temporary file and renamed
into place, so concurrent runs (``--jobs``) never read or write half an entry.

Only what this user wrote is trusted. The key is computable by anyone who can stat the
source, so on a shared folder another local user could plant an entry (random windows, their
text as the parse report). The folder is therefore used only if it is this user's and not
writable by group or others (fedprune makes it 0700), and an entry only if it is a regular
file (not a link) of this user, not writable by group or others: else one ``fedprune: note:``
line says why and the source is parsed instead (a foreign entry in the user's own folder is
deleted and rewritten; a foreign folder is not used at all, so nothing is cached there).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from pathlib import Path

import numpy as np

from fedprune.data.windows import WindowedDataset
from fedprune.runs.npz import read_arrays

ENV_CACHE_DIR = "FEDPRUNE_CACHE_DIR"
FORMAT = 2  # bump when the readers' output or the stored layout changes (2: WISDM
# refuses non-finite values instead of skipping them, so no entry made before may stand)

KEYS = ("x", "y", "subject", "class_names", "channel_names", "name", "note")


def cache_dir() -> Path:
    """``$FEDPRUNE_CACHE_DIR`` or ``~/.cache/fedprune``."""
    env = os.environ.get(ENV_CACHE_DIR)
    return Path(env) if env else Path.home() / ".cache" / "fedprune"


def cache_key(source: Path, params: dict) -> str:
    """Hex key of the source file's identity and the preprocessing parameters."""
    stat = source.stat()
    identity = {
        "path": str(source.resolve()),
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "params": params,
        "format": FORMAT,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]


def _arrays(data: WindowedDataset, note: str) -> dict[str, np.ndarray]:
    return {
        "x": data.x,
        "y": data.y,
        "subject": data.subject,
        "class_names": np.array(data.class_names),
        "channel_names": np.array(data.channel_names),
        "name": np.array(data.name),
        "note": np.array(note),
    }


def check_arrays(arrays: dict[str, np.ndarray], name: str | None = None) -> str | None:
    """Why ``arrays`` (the :data:`KEYS` of an entry) are not a valid dataset, or ``None``.

    The rule is what every reader guarantees: x float32 (N, T, C) with N >= 1 and every value
    finite; y and subject integer (N,); y in ``[0, len(class_names))``; C channel names;
    ``name`` (and ``note``) a string, ``name`` equal to the expected dataset if given.
    """
    missing = [k for k in KEYS if k not in arrays]
    if missing:
        return f"missing {', '.join(missing)}"
    x, y, subject = arrays["x"], arrays["y"], arrays["subject"]
    classes, channels = arrays["class_names"], arrays["channel_names"]
    for key in ("name", "note"):
        if arrays[key].ndim != 0 or arrays[key].dtype.kind != "U":
            return f"{key} is not a string"
    if name is not None and str(arrays["name"]) != name:
        return f"holds dataset {str(arrays['name'])!r}, not {name!r}"
    for key, names in (("class_names", classes), ("channel_names", channels)):
        if names.ndim != 1 or names.dtype.kind != "U" or len(names) == 0:
            return f"{key} is not a list of names"
    if x.dtype != np.float32 or x.ndim != 3 or len(x) == 0:
        return f"x is {x.dtype} {x.shape}, not non-empty float32 (N, T, C)"
    if x.shape[2] != len(channels):
        return f"x has {x.shape[2]} channels but {len(channels)} channel names"
    for key, a in (("y", y), ("subject", subject)):
        if a.dtype.kind not in "iu" or a.ndim != 1 or len(a) != len(x):
            return f"{key} is {a.dtype} {a.shape}, not integer ({len(x)},)"
    if y.min() < 0 or y.max() >= len(classes):
        return f"labels outside 0-{len(classes) - 1}"
    finite = np.isfinite(x)
    if not finite.all():
        return f"x has {int(x.size - np.count_nonzero(finite))} non-finite values"
    return None


def save(path: Path, data: WindowedDataset, note: str) -> None:
    """Write ``data`` (and a one-line ``note``, e.g. a parse report) atomically.

    The temporary file has a unique name, so two processes saving the same entry at once each
    rename a complete file into place. Data that :func:`check_arrays` would refuse is a reader
    bug and raises ``ValueError`` rather than being cached (and rebuilt at every load).
    """
    arrays = _arrays(data, note)
    problem = check_arrays(arrays, data.name)
    if problem is not None:
        raise ValueError(f"refusing to cache invalid {data.name} windows: {problem}")
    if path.parent.exists() and untrusted(path.parent, folder=True):
        return  # :func:`load` said so in its note; nothing is cached in another's folder
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    from fedprune.runs.files import write_npz

    write_npz(path, arrays)


def load(path: Path, name: str | None = None) -> tuple[WindowedDataset, str] | None:
    """The cached dataset and note; ``None`` if absent, or if unreadable or invalid.

    An entry that cannot be read (truncated, bad CRC, not an npz, pickled objects) or whose
    arrays fail :func:`check_arrays` (for dataset ``name`` if given) is deleted, and one line
    ``fedprune: note: cache entry <path> was unreadable (<reason>); rebuilding it`` goes to
    stderr; the caller then rebuilds it from the source. Every exception counts as unreadable
    here, on purpose: damaged zip and npy data surface as many exception types, and an entry
    is only ever a copy of what the source gives, so dropping it is always safe.
    """
    folder_problem = untrusted(path.parent, folder=True) if path.parent.exists() else None
    if folder_problem is not None:
        if path.parent not in _NOTED_FOLDERS:
            _NOTED_FOLDERS.add(path.parent)
            print(
                f"fedprune: note: not using the cache folder {path.parent}: it {folder_problem}, "
                f"so another user could plant entries; set {ENV_CACHE_DIR} to a folder of "
                "yours that only you can write",
                file=sys.stderr,
            )
        return None
    if not os.path.lexists(path):
        return None
    entry_problem = untrusted(path)
    if entry_problem is not None:
        _discard(path, f"it {entry_problem}; another user may have written it")
        return None
    try:
        z = read_arrays(path)  # the one npz reader: shapes checked before allocating
        arrays = {k: z[k] for k in KEYS if k in z}
        problem = check_arrays(arrays, name)
        if problem is not None:
            raise ValueError(problem)
        data = WindowedDataset(
            name=str(arrays["name"]),
            x=arrays["x"],
            y=arrays["y"],
            subject=arrays["subject"],
            class_names=tuple(str(c) for c in arrays["class_names"]),
            channel_names=tuple(str(c) for c in arrays["channel_names"]),
        )
        return data, str(arrays["note"])
    except Exception as err:  # noqa: BLE001 - see the docstring
        _discard(path, err)
        return None


_NOTED_FOLDERS: set[Path] = set()  # a refused folder is noted once per process


def untrusted(path: Path, folder: bool = False) -> str | None:
    """Why the cache ``folder`` or entry at ``path`` may hold what another user wrote
    (e.g. ``'belongs to uid 65534, not to you (uid 1000)'``), or ``None``. An entry is looked
    at itself (a symbolic link is refused), a folder where it leads."""
    info = os.stat(path) if folder else os.lstat(path)
    kind = stat.S_ISDIR(info.st_mode) if folder else stat.S_ISREG(info.st_mode)
    if not kind:
        return "is not a folder" if folder else "is not a regular file"
    if info.st_uid != os.getuid():
        return f"belongs to uid {info.st_uid}, not to you (uid {os.getuid()})"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"is writable by other users (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def _discard(path: Path, err: BaseException | str) -> None:
    """Delete an entry that cannot be used, with one note (``err``: why; a text: an entry
    that may be another user's, which is ignored rather than unreadable)."""
    reason = err if isinstance(err, str) else " ".join(str(err).split()) or type(err).__name__
    if len(reason) > 200:
        reason = reason[:197] + "..."
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass  # rebuilding rewrites it; if that fails too, the registry says so
    what = "was ignored" if isinstance(err, str) else "was unreadable"
    print(f"fedprune: note: cache entry {path} {what} ({reason}); rebuilding it", file=sys.stderr)
