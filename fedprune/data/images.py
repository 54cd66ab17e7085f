"""MNIST-family image datasets (MNIST, Fashion-MNIST, KMNIST, EMNIST-digits) from their
official files.

Every file of a dataset is located (or downloaded, sha256-checked) on its own through
:func:`fedprune.data.sources.locate_source`, in the dataset's sub-folder of the data directory
(``--data-dir`` > ``$FEDPRUNE_DATA_DIR`` > ``./data``):

* ``mnist/``, ``fashion_mnist/``: ``{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz`` (idx
  format, gzipped or plain). MNIST is downloaded from the CVDF mirror
  ``https://storage.googleapis.com/cvdf-datasets/mnist/`` because the original
  ``http://yann.lecun.com/exdb/mnist/`` often refuses downloads; both serve the same files.
* ``kmnist/``: ``kmnist-{train,test}-{imgs,labels}.npz`` (numpy ``.npz``, key ``arr_0``).
* ``emnist_digits/``: ``emnist-digits-{train,test}-{images-idx3,labels-idx1}-ubyte.gz``, loose
  or inside NIST's official ``gzip.zip`` (members under ``gzip/``). EMNIST images are stored
  transposed relative to MNIST (NIST wrote them column by column); :func:`load_images` returns
  them transposed back, so every dataset here has MNIST's orientation.

The sha256 of the MNIST, Fashion-MNIST and KMNIST files are those of the official files;
where none is known (KMNIST train
images, EMNIST's ``gzip.zip``) the first download's digest is recorded and enforced at every
later use (see :mod:`fedprune.data.sources`).

The official files are uint8 images and labels, and :func:`load_images` accepts nothing else.
The generic readers :func:`parse_idx` / :func:`read_idx` and :func:`read_npz_array` accept the
other numeric dtypes the formats allow, but refuse a floating-point array holding ``nan`` or
``inf``: no image or label is non-finite, and such a value is always corruption.
"""

from __future__ import annotations

import dataclasses
import gzip
import os
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np

from fedprune.data import sources
from fedprune.data.sources import DataSource, Download
from fedprune.errors import DataError
from fedprune.runs.npz import read_arrays

NAMES = ("mnist", "fashion_mnist", "kmnist", "emnist_digits")
SPLITS = ("train", "test")
IMAGE_SHAPE = (28, 28)

# idx type code -> big-endian numpy dtype
_IDX_DTYPES = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}

_MNIST_URL = "https://storage.googleapis.com/cvdf-datasets/mnist/"
_FASHION_URL = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
_KMNIST_URL = "http://codh.rois.ac.jp/kmnist/dataset/kmnist/"
_EMNIST_URL = "https://biometrics.nist.gov/cs_links/EMNIST/gzip.zip"
_EMNIST_ZIP = "gzip.zip"
_EMNIST_MEMBER_DIR = "gzip/"

_HOMEPAGES = {
    "mnist": "http://yann.lecun.com/exdb/mnist/ (official; often refuses downloads, "
    "mirrored at https://storage.googleapis.com/cvdf-datasets/mnist/)",
    "fashion_mnist": "https://github.com/zalandoresearch/fashion-mnist",
    "kmnist": "https://github.com/rois-codh/kmnist",
    "emnist_digits": "https://www.nist.gov/itl/products-and-services/emnist-dataset",
}

# sha256 of the official files (MNIST/Fashion-MNIST idx .gz, KMNIST .npz); absent = unknown
_SHA256: dict[tuple[str, str], str] = {
    ("mnist", "t10k-images-idx3-ubyte.gz"): (
        "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6"
    ),
    ("mnist", "t10k-labels-idx1-ubyte.gz"): (
        "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6"
    ),
    ("mnist", "train-images-idx3-ubyte.gz"): (
        "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609"
    ),
    ("mnist", "train-labels-idx1-ubyte.gz"): (
        "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c"
    ),
    ("fashion_mnist", "t10k-images-idx3-ubyte.gz"): (
        "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073"
    ),
    ("fashion_mnist", "t10k-labels-idx1-ubyte.gz"): (
        "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5"
    ),
    ("fashion_mnist", "train-images-idx3-ubyte.gz"): (
        "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84"
    ),
    ("fashion_mnist", "train-labels-idx1-ubyte.gz"): (
        "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845"
    ),
    ("kmnist", "kmnist-test-imgs.npz"): (
        "692d824896bec8f3c357ebf7a0fe904ed67ac632ce953d0b58f7fbef7bb27d87"
    ),
    ("kmnist", "kmnist-test-labels.npz"): (
        "660f13a4705431ea2a6391c41ecbe384cd0d932c595a101ec4f3b8989e785046"
    ),
    ("kmnist", "kmnist-train-labels.npz"): (
        "a325c877035602cb9b9ba54f4194a2a1b5f718026a463db5b5e0cdc124c03720"
    ),
}


def _idx_names(prefix: str) -> dict[str, str]:
    return {
        "images": f"{prefix}-images-idx3-ubyte.gz",
        "labels": f"{prefix}-labels-idx1-ubyte.gz",
    }


def file_names(name: str, split: str) -> dict[str, str]:
    """The official file names (``{"images": ..., "labels": ...}``) of one split of a dataset."""
    _check_name_split(name, split)
    if name in ("mnist", "fashion_mnist"):
        return _idx_names("train" if split == "train" else "t10k")
    if name == "kmnist":
        return {"images": f"kmnist-{split}-imgs.npz", "labels": f"kmnist-{split}-labels.npz"}
    return _idx_names(f"emnist-digits-{split}")


def file_source(name: str, split: str, role: str) -> DataSource:
    """The :class:`DataSource` of one file (``role`` ``"images"`` or ``"labels"``).

    Its candidates are the official file name and, for idx files, the same without ``.gz``;
    for EMNIST also NIST's ``gzip.zip``, which is what gets downloaded.
    """
    filename = file_names(name, split)[role]
    candidates: tuple[str, ...] = (filename,)
    if filename.endswith(".gz"):
        candidates += (filename[: -len(".gz")],)
    base = {"mnist": _MNIST_URL, "fashion_mnist": _FASHION_URL, "kmnist": _KMNIST_URL}
    if name in base:
        download = Download(base[name] + filename, filename, _SHA256.get((name, filename)))
    else:
        candidates += (_EMNIST_ZIP,)
        download = Download(_EMNIST_URL, _EMNIST_ZIP, None)
    return DataSource(
        name=f"{name} {split} {role}",
        folder=name,
        candidates=candidates,
        download=download,
        homepage=_HOMEPAGES[name],
    )


def _check_name_split(name: str, split: str) -> None:
    if name not in NAMES:
        raise DataError(f"unknown image dataset {name!r}; choose one of: {', '.join(NAMES)}")
    if split not in SPLITS:
        raise DataError(f"unknown split {split!r} for {name}; choose 'train' or 'test'")


def parse_idx(raw: bytes, where: str) -> np.ndarray:
    """Decode the bytes of an (uncompressed) idx file; ``where`` names it in errors.

    The header is the magic ``0x00 0x00 <type code> <ndim>`` followed by ``ndim`` big-endian
    uint32 dimensions; the payload must hold exactly ``prod(dims)`` values of that type.
    The result is in native byte order.
    """
    if len(raw) < 4:
        raise DataError(f"{where}: not an idx file ({len(raw)} bytes, shorter than the magic)")
    zero1, zero2, code, ndim = raw[0], raw[1], raw[2], raw[3]
    if zero1 != 0 or zero2 != 0 or code not in _IDX_DTYPES or ndim == 0:
        raise DataError(
            f"{where}: bad idx magic {raw[:4].hex()} (expected 0000 + type code "
            f"{'/'.join(f'{c:02x}' for c in _IDX_DTYPES)} + ndim >= 1); not an idx file"
        )
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DataError(f"{where}: truncated idx header ({len(raw)} of {header} bytes)")
    dims = struct.unpack(f">{ndim}I", raw[4:header])
    dtype = _IDX_DTYPES[code]
    expected = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    payload = len(raw) - header
    if payload != expected:
        what = "truncated" if payload < expected else "has trailing bytes"
        raise DataError(
            f"{where}: idx payload {what}: {payload} bytes, dims {list(dims)} need {expected}"
        )
    array = np.frombuffer(raw, dtype=dtype, offset=header).reshape(dims)
    return _require_finite(array.astype(dtype.newbyteorder("="), copy=True), where)


def _require_finite(array: np.ndarray, where: str) -> np.ndarray:
    """``array``, unless it is floating point with a nan or inf (one DataError naming it)."""
    if array.dtype.kind in "fc":
        finite = np.isfinite(array)
        if not finite.all():
            count = int(array.size - np.count_nonzero(finite))
            first = tuple(int(i) for i in np.argwhere(~finite)[0])
            raise DataError(
                f"{where}: {count} non-finite value{'s' if count > 1 else ''} (nan/inf) in a "
                f"{array.dtype} array, the first {array[first]} at index {first}; the file "
                "is corrupt or not the official one: download it again"
            )
    return array


def _gunzip_if_needed(raw: bytes, where: str) -> bytes:
    if raw[:2] != b"\x1f\x8b":
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as err:
        raise DataError(f"{where}: corrupt or truncated gzip data ({err})") from None


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read an idx file (gzipped or plain, detected from its content).

    Raises
    ------
    DataError
        One line naming the file: unreadable, corrupt gzip, wrong magic, or a payload whose
        length does not match the dimensions in the header (truncated or trailing bytes).
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise DataError(f"{path}: cannot read ({err.strerror or err})") from None
    return parse_idx(_gunzip_if_needed(raw, str(path)), str(path))


def read_npz_array(path: str | os.PathLike, key: str = "arr_0") -> np.ndarray:
    """Array ``key`` of an ``.npz`` file, loaded with ``allow_pickle=False``.

    Raises
    ------
    DataError
        If the file is missing, corrupt, holds object arrays, lacks ``key``, or ``key`` is a
        floating-point array with a nan or inf.
    """
    path = Path(path)
    try:
        arrays = read_arrays(path)  # the one npz reader: shapes checked before allocating
    except (OSError, ValueError) as err:  # NpzProblem is a ValueError
        raise DataError(f"{path}: not a readable npz file ({err})") from None
    if key not in arrays:
        raise DataError(
            f"{path}: no array {key!r} in the npz (it has: {', '.join(arrays) or 'nothing'})"
        )
    return _require_finite(arrays[key], str(path))


@dataclasses.dataclass(frozen=True, eq=False)
class ImageDataset:
    """One split of an image dataset, before any federated partition.

    Attributes
    ----------
    x : uint8 array (n, 28, 28), MNIST orientation (EMNIST is transposed back on loading).
    y : int64 array (n,): the true class of each image.
    name : dataset name (``"mnist"``, ``"fashion_mnist"``, ``"kmnist"``, ``"emnist_digits"``).
    split : ``"train"`` or ``"test"``.
    files : the files read (an EMNIST ``gzip.zip`` once, though both arrays come from it).
    """

    x: np.ndarray
    y: np.ndarray
    name: str
    split: str
    files: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        if self.x.ndim != 3 or len(self.y) != len(self.x) or self.y.ndim != 1:
            raise DataError(
                f"{self.name} {self.split}: inconsistent shapes x {self.x.shape}, y {self.y.shape}"
            )

    def __len__(self) -> int:
        return len(self.y)

    @property
    def classes(self) -> np.ndarray:
        """Sorted distinct labels."""
        return np.unique(self.y)


def _read_member_idx(archive: Path, member: str) -> np.ndarray:
    where = f"{archive}:{member}"
    try:
        with zipfile.ZipFile(archive) as zf:
            if member not in zf.namelist():
                raise DataError(
                    f"{archive}: no member {member!r}; expected NIST's EMNIST gzip.zip "
                    f"({_EMNIST_URL})"
                )
            try:
                raw = zf.read(member)
            except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as err:
                raise DataError(
                    f"{archive}: member {member!r} cannot be read ({err}); the archive is "
                    f"corrupt: download it again from {_EMNIST_URL}"
                ) from None
    except DataError:
        raise
    except (OSError, zipfile.BadZipFile, zlib.error, EOFError, ValueError) as err:
        raise DataError(f"{archive}: not a readable zip ({err})") from None
    return parse_idx(_gunzip_if_needed(raw, where), where)


def _read_file(name: str, path: Path, official: str) -> np.ndarray:
    if name == "kmnist":
        return read_npz_array(path)
    if path.name == _EMNIST_ZIP:
        return _read_member_idx(path, _EMNIST_MEMBER_DIR + official)
    return read_idx(path)


def _locate(name: str, split: str, role: str, data_dir: Path, download: bool) -> Path:
    source = file_source(name, split, role)
    if name != "kmnist" or split != "train" or role != "images":
        return sources.locate_source(source, data_dir, download)
    folder = data_dir / source.folder
    test_present = (folder / file_names(name, "test")["images"]).exists()
    if not test_present:
        return sources.locate_source(source, data_dir, download)
    try:
        return sources.locate_source(source, data_dir, download)
    except DataError as err:
        cause = f" ({err})" if download else ""
        raise DataError(
            f"kmnist: only the test split is present in {folder} "
            f"({source.download.filename} is missing); use split='test', or download "
            f"{source.download.url} into that folder{cause}"
        ) from None


def load_images(
    name: str,
    split: str = "train",
    data_dir: str | os.PathLike | None = None,
    download: bool = True,
) -> ImageDataset:
    """Load one split of ``mnist``, ``fashion_mnist``, ``kmnist`` or ``emnist_digits``.

    Parameters
    ----------
    name : dataset name, one of :data:`NAMES`.
    split : ``"train"`` or ``"test"`` (MNIST's ``t10k`` files).
    data_dir : data directory (default ``$FEDPRUNE_DATA_DIR`` or ``./data``); files are looked
        up in its ``<name>/`` sub-folder.
    download : fetch missing files from the official location (sha256-checked).

    Returns
    -------
    ImageDataset
        uint8 images (n, 28, 28) in MNIST orientation and int64 labels.

    Raises
    ------
    DataError
        Missing files (naming them and their download URL), corrupt files, an image/label
        count mismatch, or images that are not 28x28 uint8.
    """
    _check_name_split(name, split)
    root = sources.require_data_dir(data_dir)
    names = file_names(name, split)
    paths = {role: _locate(name, split, role, root, download) for role in ("images", "labels")}
    x = _read_file(name, paths["images"], names["images"])
    y = _read_file(name, paths["labels"], names["labels"])
    where = f"{name} {split} ({paths['images']})"
    if x.ndim != 3 or x.shape[1:] != IMAGE_SHAPE or x.dtype != np.uint8:
        raise DataError(
            f"{where}: images must be uint8 of shape (n, 28, 28), got {x.dtype} {x.shape}"
        )
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        raise DataError(f"{where}: labels must be a 1-d integer array, got {y.dtype} {y.shape}")
    if len(x) != len(y):
        raise DataError(
            f"{where}: {len(x)} images but {len(y)} labels in {paths['labels']}; "
            "the files do not belong together or one is truncated"
        )
    if name == "emnist_digits":
        x = np.ascontiguousarray(x.transpose(0, 2, 1))
    files = tuple(dict.fromkeys(paths.values()))
    return ImageDataset(x=x, y=y.astype(np.int64), name=name, split=split, files=files)
