"""UCI-HAR (Anguita et al. 2013) from its official ``UCI HAR Dataset/`` layout.

Reads the nine ``Inertial Signals`` channels of the train and test folders, in the order
body_acc xyz, body_gyro xyz, total_acc xyz, as (N, 128, 9) float32, with labels 1-6 mapped to
0-5 and the subject of every window. Train and test are pooled (10,299 windows, 30 subjects):
the federated split is per subject (see :mod:`fedprune.data.partition`), not the official
subject-disjoint split.

Accepted inputs: the ``UCI HAR Dataset`` directory, a zip containing it, or the UCI
repository's download, a zip that contains ``UCI HAR Dataset.zip``.

Every problem is one :class:`~fedprune.errors.DataError` naming the file (for a zip, the
archive and the member); nothing is skipped or repaired, since UCI-HAR's files are aligned
row by row (a dropped window would shift every label after it):

* a member that cannot be read (bad CRC-32, damaged compressed data, encryption) means a
  corrupt or truncated archive: download it again from the official URL;
* a line with the wrong number of values, or a value that is not a number, names the line;
* a signal value that is not finite *as float32* (``nan``, ``inf``, or a number such as
  ``1e39`` that overflows float32) names its line and the file's count of such values: the
  sensors cannot produce them, and one would poison every statistic and gradient downstream.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np

from fedprune.data import sources
from fedprune.data.windows import WindowedDataset
from fedprune.errors import DataError


def _download_hint() -> str:
    source = sources.SOURCES["uci_har"]
    return f"download it again from {source.download.url} (see {source.homepage})"


ROOT = "UCI HAR Dataset"
WINDOW = 128
SIGNALS = tuple(
    f"{kind}_{axis}" for kind in ("body_acc", "body_gyro", "total_acc") for axis in "xyz"
)
CLASS_NAMES = (
    "WALKING",
    "WALKING_UPSTAIRS",
    "WALKING_DOWNSTAIRS",
    "SITTING",
    "STANDING",
    "LAYING",
)


class _Tree:
    """Read-only view of the ``UCI HAR Dataset`` tree, in a directory or a zip."""

    def __init__(self, path: Path):
        self.path = path
        self._zip: zipfile.ZipFile | None = None
        self._prefix = ""
        self._container = ""  # "<nested zip>:" when the tree is inside the UCI download
        if path.is_dir():
            self._dir = path if (path / "train").is_dir() else path / ROOT
            return
        try:
            zf = zipfile.ZipFile(path)
        except sources.ZIP_ERRORS as err:
            raise DataError(
                f"{path}: not a readable zip archive ({_one_line(err)}); it is truncated or "
                f"corrupt: {_download_hint()}"
            ) from None
        names = zf.namelist()
        nested = [n for n in names if n.endswith(f"{ROOT}.zip")]
        if not any(n.split("/")[-3:-2] == [ROOT] or n.startswith(ROOT + "/") for n in names):
            if not nested:
                raise DataError(f"{path}: the archive has no '{ROOT}/' folder")
            try:
                zf = zipfile.ZipFile(io.BytesIO(zf.read(nested[0])))
            except sources.ZIP_ERRORS as err:
                raise DataError(
                    f"{path}: member '{nested[0]}' cannot be read ({_one_line(err)}); the "
                    f"archive is corrupt: {_download_hint()}"
                ) from None
            self._container = nested[0] + ":"
            names = zf.namelist()
        self._zip = zf
        marker = f"{ROOT}/train/y_train.txt"
        hits = [n for n in names if n.endswith(marker)]
        if not hits:
            raise DataError(f"{path}: '{marker}' missing from the archive")
        self._prefix = hits[0][: -len("train/y_train.txt")]

    def where(self, rel: str) -> str:
        """How errors name file ``rel``: its path, or ``<archive>:<member>`` in a zip."""
        if self._zip is None:
            return str(self._dir / rel)
        return f"{self.path}:{self._container}{self._prefix}{rel}"

    def read(self, rel: str) -> bytes:
        """The bytes of ``rel``; a missing or unreadable file is one DataError naming it."""
        if self._zip is None:
            try:
                return (self._dir / rel).read_bytes()
            except FileNotFoundError:
                raise DataError(
                    f"{self.path}: '{ROOT}/{rel}' is missing; the UCI-HAR copy is incomplete"
                ) from None
            except OSError as err:
                raise DataError(f"{self.where(rel)}: cannot read ({_one_line(err)})") from None
        member = self._prefix + rel
        try:
            return self._zip.read(member)
        except KeyError:
            raise DataError(
                f"{self.path}: '{ROOT}/{rel}' is missing; the UCI-HAR copy is incomplete"
            ) from None
        except sources.ZIP_ERRORS as err:
            raise DataError(
                f"{self.path}: member '{self._container}{member}' cannot be read "
                f"({_one_line(err)}); the archive is corrupt: {_download_hint()}"
            ) from None


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def _first_non_numeric(lines: list[bytes], dtype: type) -> tuple[int, str]:
    """(1-based line, token) of the first token that ``dtype`` cannot hold."""
    integer = np.issubdtype(dtype, np.integer)
    limits = np.iinfo(dtype) if integer else None
    for number, line in enumerate(lines, 1):
        for token in line.split():
            try:
                value = int(token) if integer else float(token)
            except ValueError:
                return number, token.decode("ascii", errors="replace")
            if limits is not None and not limits.min <= value <= limits.max:
                return number, token.decode("ascii", errors="replace")
    return 0, "?"  # not reached: astype failed on some token


def _parse_matrix(raw: bytes, where: str, columns: int, dtype: type) -> np.ndarray:
    """Parse whitespace-separated numbers, ``columns`` per line, into ``dtype``.

    ``where`` names the file in errors, each of which gives the 1-based line: a wrong number
    of values, a token that is not a number, and (for float dtypes) a value that is not
    finite *after* the cast, so ``nan``, ``inf`` and overflows such as ``1e39`` (inf in
    float32) are all refused, with the count of such values in the file.
    """
    lines = raw.split(b"\n")
    if lines and not lines[-1].strip():
        lines.pop()
    flat = np.array(raw.split(), dtype=object)
    if flat.size != len(lines) * columns:
        for i, line in enumerate(lines, 1):
            if len(line.split()) != columns:
                raise DataError(
                    f"{where}, line {i}: expected {columns} values, found {len(line.split())}"
                )
    try:
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported below
            values = flat.astype(dtype).reshape(len(lines), columns)
    except (ValueError, OverflowError):
        number, token = _first_non_numeric(lines, dtype)
        raise DataError(
            f"{where}, line {number}: {token!r} is not a {np.dtype(dtype).name} number"
        ) from None
    if values.dtype.kind == "f":
        bad = ~np.isfinite(values)
        if bad.any():
            line, column = (int(i) for i in np.argwhere(bad)[0])
            token = flat[line * columns + column].decode("ascii", errors="replace")
            count = int(bad.sum())
            raise DataError(
                f"{where}, line {line + 1}: non-finite value {token!r} as float32 "
                f"({count} non-finite value{'s' if count > 1 else ''} in the file; nan, inf "
                "and numbers beyond +-3.4e38 are not sensor readings): the file is corrupt, "
                f"{_download_hint()}"
            )
    return values


def read_uci_har(path: str | Path) -> WindowedDataset:
    """Read UCI-HAR's raw inertial windows from ``path`` (directory or zip).

    Returns
    -------
    WindowedDataset with x (10299, 128, 9) float32 for the full dataset.
    """
    tree = _Tree(Path(path))
    xs, ys, subjects = [], [], []
    for split in ("train", "test"):
        y_rel, subject_rel = f"{split}/y_{split}.txt", f"{split}/subject_{split}.txt"
        y = _parse_matrix(tree.read(y_rel), tree.where(y_rel), 1, np.int64)[:, 0]
        if len(y) == 0:
            raise DataError(f"{tree.where(y_rel)}: no labels; the UCI-HAR copy is incomplete")
        subject = _parse_matrix(tree.read(subject_rel), tree.where(subject_rel), 1, np.int64)[:, 0]
        if len(subject) != len(y):
            raise DataError(
                f"{path}: subject_{split}.txt has {len(subject)} rows, y_{split}.txt {len(y)}"
            )
        if y.min() < 1 or y.max() > len(CLASS_NAMES):
            raise DataError(f"{path}: y_{split}.txt has labels outside 1-{len(CLASS_NAMES)}")
        channels = []
        for signal in SIGNALS:
            name = f"{signal}_{split}.txt"
            rel = f"{split}/Inertial Signals/{name}"
            m = _parse_matrix(tree.read(rel), tree.where(rel), WINDOW, np.float32)
            if len(m) != len(y):
                raise DataError(f"{path}: {name} has {len(m)} windows, y_{split}.txt {len(y)}")
            channels.append(m)
        xs.append(np.stack(channels, axis=-1))
        ys.append(y - 1)
        subjects.append(subject)
    return WindowedDataset(
        name="uci_har",
        x=np.concatenate(xs).astype(np.float32),
        y=np.concatenate(ys),
        subject=np.concatenate(subjects),
        class_names=CLASS_NAMES,
        channel_names=SIGNALS,
    )
