"""Where each dataset lives: the data directory, the expected files, official downloads.

The data directory is chosen as ``--data-dir`` > env ``FEDPRUNE_DATA_DIR`` > ``./data``.
Each dataset has a sub-folder (``uci_har/``, ``wisdm/``) holding any one of the accepted
files. When none is present the official archive is downloaded into that sub-folder and
its sha256 checked; without network access a single error names the files and URLs.

Rules (each failure is one :class:`~fedprune.errors.DataError` line naming the path):

* The data directory must exist. It is never created: a mistyped ``--data-dir`` would
  otherwise become a fresh, empty download target and the real data would silently go
  unused. Only the dataset's sub-folder may be created, inside an existing data directory.
* A located file with a ``<file>.sha256`` record beside it (written at its first download when
  no published checksum exists) is re-hashed at every use and must still match: a file that
  changed since it was downloaded (disk corruption, an interrupted copy, a replaced file) is
  refused instead of being parsed. Cost, measured with :func:`sha256_of`: 60 MB (the size of
  the UCI download) hash in 0.04 s on a CPU with SHA instructions and 0.13 s without them,
  the 32 MB staged UCI-HAR zip in 0.03 s. That is well under the 0.3 s budget for this check,
  so the file is simply re-hashed at every use; no sidecar of verified (size, mtime, digest)
  is kept, and so there is no second record that could go stale.
* Published checksums (:attr:`Download.sha256`) are checked at download. The MNIST,
  Fashion-MNIST and KMNIST ones (in :mod:`fedprune.data.images`) are those of the official
  files; no digest of the official UCI-HAR or WISDM archives is known to us, so those two
  stay ``None`` and rely on the recorded digest.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import sys
import tempfile
import urllib.request
import zipfile
import zlib
from pathlib import Path

from fedprune.errors import DataError

# What reading a zip member (or an npz, itself a zip) can raise when the archive is damaged:
# a bad CRC-32 or header (BadZipFile), damaged deflate data (zlib.error), a truncated stream
# (EOFError), an I/O error (OSError), a corrupt size or offset (ValueError), a compression
# method or encryption flag that the official archives do not use (NotImplementedError,
# RuntimeError). Readers turn each into one DataError line that names the file.
ZIP_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    EOFError,
    OSError,
    ValueError,
    NotImplementedError,
    RuntimeError,
)

ENV_DATA_DIR = "FEDPRUNE_DATA_DIR"


@dataclasses.dataclass(frozen=True)
class Download:
    """An official archive: where it comes from and what it must hash to.

    ``sha256`` is ``None`` where no published checksum exists; then the digest of the
    first download is written beside the file (``<name>.sha256``) and every later use is
    checked against it, and the reader's own content checks (file layout, window counts)
    catch truncated or wrong archives.
    """

    url: str
    filename: str
    sha256: str | None


@dataclasses.dataclass(frozen=True)
class DataSource:
    """A dataset's folder name, the files accepted in it (first match wins), and its download."""

    name: str
    folder: str
    candidates: tuple[str, ...]
    download: Download
    homepage: str


SOURCES: dict[str, DataSource] = {
    "uci_har": DataSource(
        name="uci_har",
        folder="uci_har",
        candidates=(
            "UCI HAR Dataset",
            "UCI HAR Dataset.zip",
            "UCI_HAR_Dataset.zip",
            "human+activity+recognition+using+smartphones.zip",
        ),
        download=Download(
            url="https://archive.ics.uci.edu/static/public/240/"
            "human+activity+recognition+using+smartphones.zip",
            filename="human+activity+recognition+using+smartphones.zip",
            sha256=None,
        ),
        homepage="https://archive.ics.uci.edu/dataset/240",
    ),
    "wisdm": DataSource(
        name="wisdm",
        folder="wisdm",
        candidates=(
            "WISDM_ar_v1.1_raw.txt",
            "WISDM_ar_v1.1_raw.txt.gz",
            "WISDM_ar_latest.tar.gz",
            "WISDM_ar_v1.1_raw_reconstructed.txt.gz",
        ),
        download=Download(
            url="https://www.cis.fordham.edu/wisdm/includes/datasets/latest/WISDM_ar_latest.tar.gz",
            filename="WISDM_ar_latest.tar.gz",
            sha256=None,
        ),
        homepage="https://www.cis.fordham.edu/wisdm/dataset.php",
    ),
}


def get_source(name: str) -> DataSource:
    """Return the registered source, or fail naming the known datasets."""
    try:
        return SOURCES[name]
    except KeyError:
        raise DataError(
            f"unknown dataset {name!r}; choose one of: {', '.join(sorted(SOURCES))}"
        ) from None


def resolve_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """``data_dir`` if given, else ``$FEDPRUNE_DATA_DIR``, else ``./data``."""
    if data_dir is not None:
        return Path(data_dir)
    env = os.environ.get(ENV_DATA_DIR)
    return Path(env) if env else Path("data")


def require_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """:func:`resolve_data_dir`, which must be an existing directory.

    It is never created here: a typo in ``--data-dir`` must fail at once instead of becoming
    a new, empty download target while the real data sits elsewhere.

    Raises
    ------
    DataError
        If the directory does not exist or is not a directory, saying where the path came
        from (``--data-dir``, ``$FEDPRUNE_DATA_DIR`` or the default ``./data``).
    """
    root = resolve_data_dir(data_dir)
    if root.is_dir():
        return root
    if data_dir is not None:
        origin, fix = "", "fix --data-dir"
    elif os.environ.get(ENV_DATA_DIR):
        origin, fix = f" (from ${ENV_DATA_DIR})", f"fix --data-dir/${ENV_DATA_DIR}"
    else:
        origin, fix = " (the default ./data)", "fix --data-dir (or set $FEDPRUNE_DATA_DIR)"
    if root.exists():
        raise DataError(f"data directory {root}{origin} is not a directory; {fix}")
    raise DataError(f"data directory {root}{origin} does not exist; create it or {fix}")


def sha256_of(path: Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def locate(name: str, data_dir: str | os.PathLike | None = None, download: bool = True) -> Path:
    """Return the path of the first accepted file of dataset ``name``, downloading if allowed.

    Raises
    ------
    DataError
        If no accepted file exists and the download is disabled or fails.
    """
    return locate_source(get_source(name), data_dir, download)


def locate_source(
    source: DataSource, data_dir: str | os.PathLike | None = None, download: bool = True
) -> Path:
    """:func:`locate` for a source given directly, e.g. one file of a multi-file dataset
    (the MNIST-family tables in :mod:`fedprune.data.images`) that is not in :data:`SOURCES`.

    The data directory must exist (:func:`require_data_dir`); a found file with a recorded
    sha256 beside it must still match it (:func:`check_recorded_sha256`).
    """
    folder = require_data_dir(data_dir) / source.folder
    for candidate in source.candidates:
        path = folder / candidate
        if path.exists():
            check_recorded_sha256(path, source)
            return path
    expected = ", ".join(repr(c) for c in source.candidates)
    if not download:
        raise DataError(
            f"{source.name}: none of {expected} found in {folder}; download {source.download.url} "
            f"(see {source.homepage}) into that folder or set --data-dir/{ENV_DATA_DIR}"
        )
    return fetch(source, folder)


def fetch(source: DataSource, folder: Path) -> Path:
    """Download ``source``'s official archive into ``folder`` and verify its sha256.

    ``folder`` (the dataset's sub-folder) is created if needed, but only inside an existing
    data directory (its parent): downloads never create the data directory itself.
    """
    if not folder.parent.is_dir():
        raise DataError(
            f"data directory {folder.parent} does not exist; create it or fix --data-dir"
        )
    target = folder / source.download.filename
    tmp_path = None
    try:
        folder.mkdir(exist_ok=True)
        print(f"downloading {source.download.url} -> {target}", file=sys.stderr)
        with tempfile.NamedTemporaryFile(dir=folder, suffix=".part", delete=False) as tmp:
            tmp_path = Path(tmp.name)
            with urllib.request.urlopen(source.download.url, timeout=60) as response:
                shutil.copyfileobj(response, tmp)
    except OSError as err:
        if tmp_path is not None:
            tmp_path.unlink(missing_ok=True)
        raise DataError(
            f"{source.name}: no data in {folder} and the download of {source.download.url} "
            f"failed ({err}); fetch it by hand (see {source.homepage}) and put one of "
            f"{', '.join(source.candidates)} in {folder}"
        ) from None
    verify_download(tmp_path, source.download, target)
    tmp_path.replace(target)
    return target


def record_path(path: Path) -> Path:
    """Where the sha256 recorded at ``path``'s first download lives: ``<file>.sha256``."""
    return path.with_name(path.name + ".sha256")


_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


def read_record(record: Path) -> str:
    """The hex digest in a ``<file>.sha256`` record (``<64 hex digits>  <name>``).

    Raises
    ------
    DataError
        If the record cannot be read or does not start with a sha256 digest: an unreadable
        record must not silently turn the check off.
    """
    try:
        fields = record.read_text(encoding="ascii", errors="replace").split()
    except OSError as err:
        raise DataError(f"{record}: cannot read the recorded sha256 ({err})") from None
    if not fields or not _SHA256_HEX.fullmatch(fields[0].lower()):
        raise DataError(
            f"{record}: not a sha256 record (expected '<64 hex digits>  <file name>'); "
            "restore it, or delete it together with the file it describes and download again"
        )
    return fields[0].lower()


def check_recorded_sha256(path: Path, source: DataSource | None = None) -> None:
    """Refuse a located file whose content no longer matches its recorded sha256.

    The record is written at the file's first download (when no checksum is published) and
    the promise is that every later use is checked against it; this is that check. Files
    without a record beside them (copied in by hand, or with a published checksum checked at
    download) and directories are not hashed. See the module docstring for the cost.

    Raises
    ------
    DataError
        Naming the file, both digests and, if ``source`` is given, where to download it.
    """
    record = record_path(path)
    if not path.is_file() or not record.is_file():
        return
    expected = read_record(record)
    try:
        actual = sha256_of(path)
    except OSError as err:
        raise DataError(f"{path}: cannot read ({err})") from None
    if actual != expected:
        again = f" from {source.download.url}" if source is not None else ""
        raise DataError(
            f"{path}: the file changed since it was downloaded (sha256 {actual}, recorded "
            f"{expected} in {record}); it is corrupt or was replaced: delete both and "
            f"download it again{again}"
        )


def verify_download(path: Path, download: Download, target: Path) -> None:
    """Check a downloaded file against the published sha256, or against the recorded one."""
    actual = sha256_of(path)
    record = record_path(target)
    expected = download.sha256 or (read_record(record) if record.exists() else None)
    if expected is not None and actual != expected:
        path.unlink(missing_ok=True)
        raise DataError(
            f"{download.url}: sha256 {actual} does not match the expected {expected}; "
            "the download is corrupt or the archive changed upstream"
        )
    if download.sha256 is None and not record.exists():
        from fedprune.runs.files import write_text

        write_text(record, f"{actual}  {target.name}\n")
        print(
            f"no published checksum for {target.name}; recorded sha256 {actual} in {record}",
            file=sys.stderr,
        )
