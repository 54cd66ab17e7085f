"""One entry point per dataset: locate (or download) the files, parse once, cache, partition."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from fedprune.data import cache, sources
from fedprune.data.partition import FederatedData, partition_by_subject
from fedprune.data.uci_har import read_uci_har
from fedprune.data.windows import WindowedDataset
from fedprune.data.wisdm import read_wisdm


def _read_uci_har(path: Path) -> tuple[WindowedDataset, str]:
    data = read_uci_har(path)
    return data, f"UCI-HAR: {len(data.y)} windows from {path}"


def _read_wisdm(path: Path) -> tuple[WindowedDataset, str]:
    data, report = read_wisdm(path)
    return data, report.summary()


READERS: dict[str, Callable[[Path], tuple[WindowedDataset, str]]] = {
    "uci_har": _read_uci_har,
    "wisdm": _read_wisdm,
}
DATASETS = tuple(READERS)


def load_windows(
    name: str,
    data_dir: str | os.PathLike | None = None,
    download: bool = True,
    use_cache: bool = True,
    verbose: bool = True,
) -> WindowedDataset:
    """The windows of dataset ``name`` read from its official files (cached as ``.npz``).

    The parse note (e.g. how many malformed WISDM records were skipped) is printed to stderr
    every time, from the cache too, so it is never hidden. A cache entry that is unreadable or
    invalid is dropped with one note by :func:`fedprune.data.cache.load`, and the source is
    parsed again and the entry rewritten; a cache that cannot be written is a note, not an
    error, since the data itself was read.
    """
    source_path = sources.locate(name, data_dir, download=download)
    reader = READERS[name]
    cache_path = cache.cache_dir() / f"{name}-{cache.cache_key(source_path, {})}.npz"
    hit = cache.load(cache_path, name) if use_cache else None
    if hit is None:
        data, note = reader(source_path)
        if use_cache:
            try:
                cache.save(cache_path, data, note)
            except OSError as err:
                print(
                    f"fedprune: note: cannot write cache entry {cache_path} ({err}); "
                    "continuing without it",
                    file=sys.stderr,
                )
    else:
        data, note = hit
    if verbose:
        print(note, file=sys.stderr)
    return data


def load_federated(
    name: str,
    seed: int = 0,
    data_dir: str | os.PathLike | None = None,
    standardize: bool = False,
    test_fraction: float = 0.2,
    verbose: bool = True,
) -> FederatedData:
    """Dataset ``name`` as one client per subject with a seeded 80/20 split."""
    data = load_windows(name, data_dir, verbose=verbose)
    return partition_by_subject(data, seed, test_fraction, standardize)
