"""Your in-memory data stored once, by content, and linked into each run that uses it.

Data you hand to a builder as arrays (:func:`fedprune.data.user.from_arrays`, ...) must be in
the run directory as ``dataset.npz``: the run resumes, fine-tunes and exports from its folder
alone, also once moved or copied. Written into every run, the same arrays cost their size per
run (35 MB per HAPT run). So they are written once, to ``$FEDPRUNE_CACHE_DIR/datasets/`` (else
``~/.cache/fedprune/datasets/``) under the SHA-256 of their content (:func:`content_sha256`),
read-only, and each run's ``dataset.npz`` is a hard link to that file: one copy on disk for
every run of the same data, and still a plain file in each run folder. Nothing that reads a
run changes, deleting the store never breaks a run (a hard link keeps the bytes), and the bytes
are the same for every run of the data, so the configuration's ``dataset_sha256`` (the file's
SHA-256, checked when a run resumes) is the same too.

The run folder says where its data came from: ``dataset.json`` holds the content hash, the
store file and whether the run's file is a link to it (``"linked": false`` where the run
folder is on another file system than the store, or the store cannot be used: the run then
holds its own copy, as before).

The store is trusted only as the parsed-data cache is (:func:`fedprune.data.cache.untrusted`):
a folder of this user's, not writable by others (made 0700), and entries that are regular
files of this user's; an entry is also checked against the SHA-256 of its bytes recorded
beside it when it was written (``<hash>.json``), so a damaged or replaced entry is rewritten,
never linked.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import secrets
from collections.abc import Callable
from pathlib import Path

import numpy as np

from fedprune.data.cache import cache_dir, untrusted

FOLDER = "datasets"
FORMAT = 1
"""Part of every content hash: bump it when what the data kinds' files hold changes."""


def store_dir() -> Path:
    """Where the data are stored: ``$FEDPRUNE_CACHE_DIR/datasets`` or
    ``~/.cache/fedprune/datasets``."""
    return cache_dir() / FOLDER


def content_sha256(data: object) -> str:
    """The hex SHA-256 of a dataset's content (a dataclass: its kind, and every field but its
    ``name``, each array by dtype, shape and bytes), the same for equal data whatever their
    memory layout, different when any value, label, id or name of a class or channel
    differs."""
    digest = hashlib.sha256(f"fedprune-data {FORMAT} {type(data).__name__}\n".encode())
    for field in sorted(dataclasses.fields(data), key=lambda f: f.name):
        if field.name == "name":
            continue
        value = getattr(data, field.name)
        digest.update(f"{field.name}\n".encode())
        if isinstance(value, np.ndarray):
            array = np.ascontiguousarray(value)
            digest.update(f"{array.dtype.str} {array.shape}\n".encode())
            digest.update(array.tobytes())
        else:
            digest.update(json.dumps(value, default=str).encode() + b"\n")
    return digest.hexdigest()


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _usable_entry(entry: Path, sidecar: Path) -> bool:
    """Whether ``entry`` is this user's, untouched since it was written (its bytes' SHA-256
    is the one recorded in ``sidecar``)."""
    try:
        if untrusted(entry) or untrusted(sidecar):
            return False
        recorded = json.loads(sidecar.read_text(encoding="utf-8")).get("sha256")
        return recorded == _file_sha256(entry)
    except (OSError, ValueError, AttributeError):
        return False


def _stored(data: object, key: str, write: Callable[[object, Path], object]) -> Path | None:
    """The store's file of ``data`` (written now where missing or unusable), or ``None``
    where the store cannot be used (another user's folder, no space, no permission)."""
    from fedprune.runs.files import write_json

    folder = store_dir()
    entry, sidecar = folder / f"{key}.npz", folder / f"{key}.json"
    try:
        if folder.exists() and untrusted(folder, folder=True):
            return None
        if _usable_entry(entry, sidecar):
            return entry
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        write(data, entry)
        entry.chmod(0o444)  # never changed in place: every run of the data links it
        write_json(sidecar, {"sha256": _file_sha256(entry), "content_sha256": key})
        return entry
    except OSError:
        return None


def place(data: object, path: Path, write: Callable[[object, Path], object]) -> dict[str, object]:
    """``data`` at ``path`` (a run's ``dataset.npz``): a hard link to its store file
    (written by ``write(data, file)`` once), else, where linking fails, its own copy written
    by ``write``. Returns what ``dataset.json`` records: the content hash, the store file
    (``None`` where the store could not be used) and whether ``path`` is a link to it."""
    key = content_sha256(data)
    entry = _stored(data, key, write)
    linked = False
    if entry is not None:
        staged = path.with_name(f".{path.name}.{secrets.token_hex(4)}.link")
        try:
            os.link(entry, staged)
            os.replace(staged, path)
            linked = True
        except OSError:  # another file system, or links not allowed there
            with contextlib.suppress(OSError):
                staged.unlink()
    if not linked:
        write(data, path)
    return {
        "content_sha256": key,
        "store": None if entry is None else str(entry),
        "linked": linked,
    }
