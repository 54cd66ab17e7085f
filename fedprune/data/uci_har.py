"""UCI-HAR (Anguita et al. 2013) from its official ``UCI HAR Dataset/`` layout.

Reads the nine ``Inertial Signals`` channels of the train and test folders, in the order
body_acc xyz, body_gyro xyz, total_acc xyz, as (N, 128, 9) float32, with labels 1-6 mapped to
0-5 and the subject of every window. Train and test are pooled (10,299 windows, 30 subjects):
the federated split is per subject (see :mod:`fedprune.data.partition`), not the official
subject-disjoint split.

Accepted inputs: the ``UCI HAR Dataset`` directory, a zip containing it, or the UCI
repository's download, a zip that contains ``UCI HAR Dataset.zip``.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np

from fedprune.data.windows import WindowedDataset
from fedprune.errors import DataError

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
        if path.is_dir():
            self._dir = path if (path / "train").is_dir() else path / ROOT
            return
        try:
            zf = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, OSError) as err:
            raise DataError(f"{path}: not a readable zip archive ({err})") from None
        names = zf.namelist()
        nested = [n for n in names if n.endswith(f"{ROOT}.zip")]
        if not any(n.split("/")[-3:-2] == [ROOT] or n.startswith(ROOT + "/") for n in names):
            if not nested:
                raise DataError(f"{path}: the archive has no '{ROOT}/' folder")
            zf = zipfile.ZipFile(io.BytesIO(zf.read(nested[0])))
            names = zf.namelist()
        self._zip = zf
        marker = f"{ROOT}/train/y_train.txt"
        hits = [n for n in names if n.endswith(marker)]
        if not hits:
            raise DataError(f"{path}: '{marker}' missing from the archive")
        self._prefix = hits[0][: -len("train/y_train.txt")]

    def read(self, rel: str) -> bytes:
        try:
            if self._zip is None:
                return (self._dir / rel).read_bytes()
            return self._zip.read(self._prefix + rel)
        except (KeyError, OSError):
            raise DataError(
                f"{self.path}: '{ROOT}/{rel}' is missing; the UCI-HAR copy is incomplete"
            ) from None


def _parse_matrix(raw: bytes, name: str, columns: int, dtype: type) -> np.ndarray:
    """Parse whitespace-separated numbers, ``columns`` per line, with a clear error."""
    lines = raw.split(b"\n")
    if lines and not lines[-1].strip():
        lines.pop()
    flat = np.array(raw.split(), dtype=object)
    if flat.size != len(lines) * columns:
        for i, line in enumerate(lines, 1):
            if len(line.split()) != columns:
                raise DataError(
                    f"{name}, line {i}: expected {columns} values, found {len(line.split())}"
                )
    try:
        return flat.astype(dtype).reshape(len(lines), columns)
    except ValueError as err:
        raise DataError(f"{name}: non-numeric value ({err})") from None


def read_uci_har(path: str | Path) -> WindowedDataset:
    """Read UCI-HAR's raw inertial windows from ``path`` (directory or zip).

    Returns
    -------
    WindowedDataset with x (10299, 128, 9) float32 for the full dataset.
    """
    tree = _Tree(Path(path))
    xs, ys, subjects = [], [], []
    for split in ("train", "test"):
        y = _parse_matrix(tree.read(f"{split}/y_{split}.txt"), f"y_{split}.txt", 1, np.int64)[:, 0]
        subject = _parse_matrix(
            tree.read(f"{split}/subject_{split}.txt"), f"subject_{split}.txt", 1, np.int64
        )[:, 0]
        if len(subject) != len(y):
            raise DataError(
                f"{path}: subject_{split}.txt has {len(subject)} rows, y_{split}.txt {len(y)}"
            )
        if y.min() < 1 or y.max() > len(CLASS_NAMES):
            raise DataError(f"{path}: y_{split}.txt has labels outside 1-{len(CLASS_NAMES)}")
        channels = []
        for signal in SIGNALS:
            name = f"{signal}_{split}.txt"
            m = _parse_matrix(
                tree.read(f"{split}/Inertial Signals/{name}"), name, WINDOW, np.float32
            )
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
