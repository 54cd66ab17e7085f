"""A cache of parsed windows: one ``.npz`` per (source file, preprocessing parameters).

Parsing the text files takes seconds; loading the cache takes milliseconds. The key hashes the
source file's resolved path, size and modification time, the reader's parameters and
:data:`FORMAT`, so a changed file or parameter never returns stale arrays. Files are loaded
with ``allow_pickle=False``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from fedprune.data.windows import WindowedDataset

ENV_CACHE_DIR = "FEDPRUNE_CACHE_DIR"
FORMAT = 1  # bump when the readers' output changes


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


def save(path: Path, data: WindowedDataset, note: str) -> None:
    """Write ``data`` (and a one-line ``note``, e.g. a parse report) atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(
        tmp,
        x=data.x,
        y=data.y,
        subject=data.subject,
        class_names=np.array(data.class_names),
        channel_names=np.array(data.channel_names),
        name=np.array(data.name),
        note=np.array(note),
    )
    tmp.replace(path)


def load(path: Path) -> tuple[WindowedDataset, str] | None:
    """The cached dataset and note, or ``None`` if absent or unreadable."""
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            data = WindowedDataset(
                name=str(z["name"]),
                x=z["x"],
                y=z["y"],
                subject=z["subject"],
                class_names=tuple(str(c) for c in z["class_names"]),
                channel_names=tuple(str(c) for c in z["channel_names"]),
            )
            return data, str(z["note"])
    except (OSError, ValueError, KeyError):
        return None
