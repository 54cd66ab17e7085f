"""The one reader of the ``.npz`` archives fedprune reads back: your data files and a run
folder's arrays (checkpoints, models, masks, assigners). It trusts nothing in the file before
it has checked it against the rest of the file:

* the file must start as a zip archive (a ``.npy`` file saved under an ``.npz`` name, which
  ``numpy.load`` would return as a bare array, is named as such);
* every member must be a ``.npy`` array of plain numbers or text (no Python objects: nothing
  is unpickled) whose header's shape times item size, plus the header, is exactly the
  member's uncompressed size as the zip directory records it, so a header declaring
  (10^12, 16, 2) is refused before anything is allocated;
* the members' uncompressed sizes together stay within :data:`MAX_BYTES` (16 GiB), and a
  member of more than :data:`RATIO_FLOOR` (64 MiB) is compressed at most :data:`MAX_RATIO`
  (200:1) — a deflate bomb (a few MB that unpack to GBs) is refused before it is unpacked.
  Real sensor windows, images and weights compress 1.1-5:1; zlib's own limit is about 1032:1.

Interpretation: the zip directory's uncompressed size bounds what is read (Python's
``zipfile`` stops at it and checks the CRC at the end), so checking the header against it
is checking the header against the bytes really there.

Every problem is a :class:`NpzProblem` (a ``ValueError``) whose text says what is wrong;
each caller turns it into its own one-line :class:`~fedprune.errors.DataError`.
"""

from __future__ import annotations

import math
import os
import zipfile
import zlib
from pathlib import Path

import numpy as np

MAX_BYTES = 16 * 2**30
"""The most bytes the arrays of one archive may unpack to."""
MAX_RATIO = 200
"""The highest compression ratio accepted for a member larger than :data:`RATIO_FLOOR`."""
RATIO_FLOOR = 64 * 2**20
"""Members up to this uncompressed size are accepted at any compression ratio."""

_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")  # a member first, or an empty archive


class NpzProblem(ValueError):
    """What is wrong with an archive, in words (no file name: the caller adds it)."""


def read_arrays(path: str | os.PathLike, max_bytes: int = MAX_BYTES) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` archive ``path``, keyed as ``numpy.savez`` named them,
    read now and checked as the module docstring says.

    Raises
    ------
    FileNotFoundError
        No file ``path``.
    NpzProblem
        The file is not such an archive, or one of its members is refused.
    """
    path = Path(path)
    with open(path, "rb") as f:
        start = f.read(len(_NPY_MAGIC))
        if start.startswith(_NPY_MAGIC):
            raise NpzProblem("a single .npy array (numpy.save), not an .npz archive (numpy.savez)")
        if not start.startswith(_ZIP_MAGICS):
            raise NpzProblem("not an .npz archive: it does not start as a zip file")
        try:
            return _members(zipfile.ZipFile(f), max_bytes)
        except NpzProblem:
            raise
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as err:
            reason = " ".join(str(err).split()) or type(err).__name__
            raise NpzProblem(f"truncated or not an .npz archive: {reason}") from None
        except (ValueError, OSError) as err:  # a bad .npy header, a failing read
            raise NpzProblem(" ".join(str(err).split()) or type(err).__name__) from None


def _members(archive: zipfile.ZipFile, max_bytes: int) -> dict[str, np.ndarray]:
    infos = archive.infolist()
    total = sum(info.file_size for info in infos)
    if total > max_bytes:
        raise NpzProblem(
            f"its arrays unpack to {_size(total)}, beyond the {_size(max_bytes)} fedprune "
            "reads from one file (fedprune.runs.npz.MAX_BYTES)"
        )
    keys = []
    for info in infos:
        if not info.filename.endswith(".npy"):
            raise NpzProblem(f"member {info.filename!r} is not a .npy array")
        keys.append(info.filename[: -len(".npy")])
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > RATIO_FLOOR and ratio > MAX_RATIO:
            raise NpzProblem(
                f"array {keys[-1]!r} unpacks {_size(info.compress_size)} to "
                f"{_size(info.file_size)} ({ratio:.0f}:1, beyond {MAX_RATIO}:1): a "
                "decompression bomb, not data"
            )
        with archive.open(info) as member:
            _check_header(member, info, keys[-1])
    if len(set(keys)) != len(keys):
        twice = sorted({k for k in keys if keys.count(k) > 1})
        raise NpzProblem(f"it holds two arrays named {twice[0]!r}")
    arrays = {}
    for key, info in zip(keys, infos):
        with archive.open(info) as member:
            arrays[key] = np.lib.format.read_array(member, allow_pickle=False)
    return arrays


def _check_header(member: zipfile.ZipExtFile, info: zipfile.ZipInfo, key: str) -> None:
    """The ``.npy`` header of ``member`` declares plain values that fill it exactly."""
    version = np.lib.format.read_magic(member)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(member)
    else:
        shape, _, dtype = np.lib.format.read_array_header_2_0(member)
    if dtype.hasobject:
        raise NpzProblem(f"array {key!r} holds Python objects, which fedprune never unpickles")
    declared = math.prod(shape) * dtype.itemsize
    payload = info.file_size - member.tell()
    if declared != payload:
        raise NpzProblem(
            f"array {key!r} declares shape {shape} of {dtype} ({_size(declared)}) but holds "
            f"{_size(max(payload, 0))}"
        )


def _size(n: int) -> str:
    """``n`` bytes in words: ``'512 bytes'``, ``'3.2 MiB'``, ``'16.0 GiB'``."""
    if n < 1024:
        return f"{n} bytes"
    power = min(int(math.log(n, 1024)), 4)
    return f"{n / 1024**power:.1f} {('KiB', 'MiB', 'GiB', 'TiB')[power - 1]}"
