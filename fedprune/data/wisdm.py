"""WISDM v1.1 (Kwapisz, Weiss, Moore 2010) from the raw line format.

Each record is ``user,activity,timestamp,x,y,z;``. The official ``WISDM_ar_v1.1_raw.txt`` has
malformed lines (several records on one line, records cut short, empty fields); every
well-formed record is kept, every malformed one is counted and reported with its line number,
and nothing is repaired or invented. Windows of 200 samples with step 100 (50 % overlap) are
cut inside each contiguous run of one (user, activity), in file order.

A record whose x, y or z is a number that is not finite *as float32* (``nan``, ``inf``, or a
number such as ``1e39`` that overflows float32, the dtype the windows are stored in) is not a
malformed line but a corrupt value, as in every reader (docs/data.md): one
:class:`~fedprune.errors.DataError` naming the file, the line and the value, with the file's
count of such records; never skipped, clipped or repaired. (The official file has none; its
malformed lines are cut-short records and empty fields.)

Accepted inputs: ``WISDM_ar_v1.1_raw.txt``, the same gzipped, or the lab's official
``WISDM_ar_latest.tar.gz`` (which contains it). A compressed file that cannot be decompressed
(truncated, bad CRC) is one :class:`~fedprune.errors.DataError` naming it and the official
URL. In the tar, every member must be a regular file or a folder with a relative path inside
the archive: a link (symbolic or hard), device or fifo member, or a name that is absolute or
climbs out with ``..``, is refused by name, since the official archive has none and such a
member would let the archive choose which bytes are read (or, once extracted, where they
go). Exactly one member must be named ``WISDM_ar_v1.1_raw.txt``.
"""

from __future__ import annotations

import dataclasses
import gzip
import tarfile
import zlib
from pathlib import Path, PurePosixPath

import numpy as np

from fedprune.data import sources
from fedprune.data.windows import WindowedDataset
from fedprune.errors import DataError

RAW_NAME = "WISDM_ar_v1.1_raw.txt"
CLASS_NAMES = ("Walking", "Jogging", "Upstairs", "Downstairs", "Sitting", "Standing")
CHANNELS = ("acc_x", "acc_y", "acc_z")
WINDOW = 200
STEP = 100
_CLASS_INDEX = {name: i for i, name in enumerate(CLASS_NAMES)}


@dataclasses.dataclass
class ParseReport:
    """What the parser kept and skipped: ``malformed`` holds (line number, reason, text)."""

    records: int = 0
    lines: int = 0
    malformed: list[tuple[int, str, str]] = dataclasses.field(default_factory=list)

    def summary(self, examples: int = 3) -> str:
        """One line for the user, with the first few malformed records."""
        text = f"WISDM: {self.records} records from {self.lines} lines"
        if not self.malformed:
            return text + ", no malformed records"
        shown = "; ".join(
            f"line {n}: {why} ({raw[:40]!r})" for n, why, raw in self.malformed[:examples]
        )
        return text + f", {len(self.malformed)} malformed records skipped (e.g. {shown})"


@dataclasses.dataclass(frozen=True)
class RawRecords:
    """Well-formed records in file order."""

    user: np.ndarray  # int64
    activity: np.ndarray  # int64 class index
    xyz: np.ndarray  # float32 (n, 3)


def _download_hint() -> str:
    source = sources.SOURCES["wisdm"]
    return f"download it again from {source.download.url} (see {source.homepage})"


def _check_member(path: Path, member: tarfile.TarInfo) -> None:
    """Refuse a tar member that is not a plain file or folder at a relative path."""
    kind = None
    if member.issym():
        kind = f"a symbolic link (to {member.linkname!r})"
    elif member.islnk():
        kind = f"a hard link (to {member.linkname!r})"
    elif not (member.isreg() or member.isdir()):
        kind = "a device, fifo or other special file"
    else:
        name = PurePosixPath(member.name)
        if name.is_absolute() or ".." in name.parts:
            kind = "a path outside the archive"
    if kind is not None:
        raise DataError(
            f"{path}: member {member.name!r} is {kind}; the official archive holds only plain "
            f"files and folders, so this one is refused: {_download_hint()}"
        )


def _read_tar(path: Path) -> bytes:
    with tarfile.open(path, "r:gz") as tar:
        members = tar.getmembers()
        for member in members:
            _check_member(path, member)
        raw = [m for m in members if PurePosixPath(m.name).name == RAW_NAME and m.isreg()]
        if not raw:
            raise DataError(f"{path}: the archive has no {RAW_NAME}")
        if len(raw) > 1:
            names = ", ".join(repr(m.name) for m in raw)
            raise DataError(f"{path}: the archive has {len(raw)} members {RAW_NAME} ({names})")
        handle = tar.extractfile(raw[0])
        if handle is None:  # not for a regular member; kept so nothing reads None
            raise DataError(f"{path}: member {raw[0].name!r} has no data")
        return handle.read()


def read_text(path: str | Path) -> str:
    """The raw file's text from ``.txt``, ``.txt.gz`` or the official ``.tar.gz``.

    Raises
    ------
    DataError
        One line naming the file: unreadable, truncated or corrupt compressed data (with the
        official URL), or a tar that breaks the member rules of the module docstring.
    """
    path = Path(path)
    compressed = path.suffix in (".gz", ".tgz")
    try:
        if path.name.endswith(".tar.gz") or path.name.endswith(".tgz"):
            data = _read_tar(path)
        elif path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                data = f.read()
        else:
            data = path.read_bytes()
    except (OSError, EOFError, zlib.error, tarfile.TarError) as err:
        detail = " ".join(str(err).split()) or type(err).__name__
        hint = f"; it is truncated or corrupt: {_download_hint()}" if compressed else ""
        raise DataError(f"{path}: cannot read ({detail}){hint}") from None
    return data.decode("utf-8", errors="replace")


# The smallest magnitude that the float32 cast turns into inf: half an ulp above the largest
# float32, where round-to-nearest-even rounds up (the largest float32's mantissa is odd). So a
# float64 v is finite as float32 exactly when -FLOAT32_OVERFLOW < v < FLOAT32_OVERFLOW; testing
# that on the parsed float64 costs what math.isfinite did, while casting every value one by one
# would slow the 1.1-million-record parse by a third.
FLOAT32_OVERFLOW = 2.0**128 - 2.0**103


@dataclasses.dataclass(frozen=True)
class _NotFinite:
    """A well-formed record with a value that is not finite as float32 (its text)."""

    token: str


def _parse_record(text: str) -> tuple[int, int, float, float, float] | str | _NotFinite:
    """A record's (user, activity, x, y, z), the reason it is malformed, or its value that
    is not finite as float32."""
    fields = text.split(",")
    if len(fields) != 6:
        return f"{len(fields)} fields instead of 6"
    user, activity, timestamp, *xyz = (f.strip() for f in fields)
    if activity not in _CLASS_INDEX:
        return f"unknown activity {activity!r}"
    try:
        uid = int(user)
        int(timestamp)
        values = [float(v) for v in xyz]
    except ValueError:
        return "non-numeric user, timestamp or value"
    x, y, z = values
    # finite after the float32 cast; nan fails every comparison
    if not (
        -FLOAT32_OVERFLOW < x < FLOAT32_OVERFLOW
        and -FLOAT32_OVERFLOW < y < FLOAT32_OVERFLOW
        and -FLOAT32_OVERFLOW < z < FLOAT32_OVERFLOW
    ):
        bad = next(t for t, v in zip(xyz, values) if not -FLOAT32_OVERFLOW < v < FLOAT32_OVERFLOW)
        return _NotFinite(bad)
    return uid, _CLASS_INDEX[activity], x, y, z


def parse_records(text: str, where: str = "WISDM") -> tuple[RawRecords, ParseReport]:
    """Parse all ``user,activity,timestamp,x,y,z;`` records; see the module docstring
    (``where`` names the file in errors)."""
    report = ParseReport()
    users, acts, xs, ys, zs = [], [], [], [], []
    not_finite: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        report.lines += 1
        for piece in line.split(";"):
            piece = piece.strip()
            if not piece:
                continue
            parsed = _parse_record(piece)
            if isinstance(parsed, str):
                report.malformed.append((number, parsed, piece))
                continue
            if isinstance(parsed, _NotFinite):
                not_finite.append((number, parsed.token))
                continue
            users.append(parsed[0])
            acts.append(parsed[1])
            xs.append(parsed[2])
            ys.append(parsed[3])
            zs.append(parsed[4])
    report.records = len(users)
    if not_finite:
        line, token = not_finite[0]
        count = len(not_finite)
        raise DataError(
            f"{where}, line {line}: non-finite value {token!r} as float32 ({count} record"
            f"{'s' if count > 1 else ''} with such a value in the file; nan, inf and numbers "
            f"beyond +-3.4e38 are not sensor readings): the file is corrupt, {_download_hint()}"
        )
    if not users:
        raise DataError("WISDM: no well-formed 'user,activity,timestamp,x,y,z;' record found")
    xyz = np.stack([xs, ys, zs], axis=1).astype(np.float32)
    if not np.isfinite(xyz).all():  # the rule above, checked once more after the real cast
        raise RuntimeError("WISDM: a non-finite float32 value passed the record check")
    records = RawRecords(
        user=np.asarray(users, dtype=np.int64),
        activity=np.asarray(acts, dtype=np.int64),
        xyz=xyz,
    )
    return records, report


def run_bounds(user: np.ndarray, activity: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of each maximal run of consecutive rows with one (user, activity)."""
    change = np.flatnonzero((np.diff(user) != 0) | (np.diff(activity) != 0)) + 1
    starts = np.concatenate([[0], change])
    ends = np.concatenate([change, [len(user)]])
    return list(zip(starts.tolist(), ends.tolist()))


def window_records(records: RawRecords, window: int = WINDOW, step: int = STEP) -> WindowedDataset:
    """Cut windows of ``window`` rows every ``step`` rows inside each (user, activity) run."""
    if window < 1 or step < 1:
        raise DataError(f"window ({window}) and step ({step}) must be positive")
    index = [
        start
        for lo, hi in run_bounds(records.user, records.activity)
        for start in range(lo, hi - window + 1, step)
    ]
    starts = np.asarray(index, dtype=np.int64)
    if starts.size == 0:
        raise DataError(f"WISDM: no run of one (user, activity) is {window} rows long")
    x = records.xyz[starts[:, None] + np.arange(window)[None, :]]
    return WindowedDataset(
        name="wisdm",
        x=x.astype(np.float32),
        y=records.activity[starts],
        subject=records.user[starts],
        class_names=CLASS_NAMES,
        channel_names=CHANNELS,
    )


def read_wisdm(
    path: str | Path, window: int = WINDOW, step: int = STEP
) -> tuple[WindowedDataset, ParseReport]:
    """Read and window WISDM v1.1 raw; the report lists what was skipped."""
    records, report = parse_records(read_text(path), str(path))
    return window_records(records, window, step), report
