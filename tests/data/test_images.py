import gzip
import io
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

from fedprune.data import images, sources
from fedprune.data.images import load_images, read_idx, read_npz_array
from fedprune.errors import DataError
from tests.conftest import damage_zip_member


def idx_bytes(array: np.ndarray, code: int = 0x08) -> bytes:
    header = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


def fake_images(n: int, seed: int = 0):
    """Asymmetric images (x != x.T) and labels 0..4 cycling."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    y = (np.arange(n) % 5).astype(np.uint8)
    return x, y


def write_idx_pair(folder: Path, names: dict, x, y, compress: bool = True) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for role, array in (("images", x), ("labels", y)):
        raw = idx_bytes(array)
        name = names[role]
        if compress:
            (folder / name).write_bytes(gzip.compress(raw))
        else:
            (folder / name.removesuffix(".gz")).write_bytes(raw)


def emnist_zip(path: Path, split: str, x_stored, y) -> None:
    names = images.file_names("emnist_digits", split)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("gzip/" + names["images"], gzip.compress(idx_bytes(x_stored)))
        zf.writestr("gzip/" + names["labels"], gzip.compress(idx_bytes(y)))
        zf.writestr("gzip/emnist-letters-train-labels-idx1-ubyte.gz", b"unrelated")


# --- read_idx -----------------------------------------------------------------------------


@pytest.mark.parametrize("compress", [True, False])
def test_read_idx_roundtrip(tmp_path, compress):
    a = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    raw = idx_bytes(a)
    path = tmp_path / "a.idx"
    path.write_bytes(gzip.compress(raw) if compress else raw)
    out = read_idx(path)
    assert out.dtype == np.uint8 and out.shape == (2, 3, 4) and (out == a).all()


def test_read_idx_other_dtypes_come_back_native(tmp_path):
    a = np.array([[1, -2], [300000, 4]], dtype=np.int32)
    (tmp_path / "i").write_bytes(idx_bytes(a, code=0x0C))
    out = read_idx(tmp_path / "i")
    assert out.dtype == np.dtype("=i4") and (out == a).all()
    f = np.array([0.5, -1.25], dtype=np.float32)
    (tmp_path / "f").write_bytes(idx_bytes(f, code=0x0D))
    assert (read_idx(tmp_path / "f") == f).all()


def test_truncated_idx_names_file_and_sizes(tmp_path):
    raw = idx_bytes(np.zeros((3, 28, 28), np.uint8))
    path = tmp_path / "t.gz"
    path.write_bytes(gzip.compress(raw[:-10]))
    with pytest.raises(DataError) as err:
        read_idx(path)
    message = str(err.value)
    assert str(path) in message and "truncated" in message and "2352" in message
    assert "\n" not in message


def test_idx_with_trailing_bytes(tmp_path):
    path = tmp_path / "t"
    path.write_bytes(idx_bytes(np.zeros(4, np.uint8)) + b"xx")
    with pytest.raises(DataError, match="trailing bytes"):
        read_idx(path)


def test_truncated_idx_header(tmp_path):
    path = tmp_path / "h"
    path.write_bytes(bytes([0, 0, 8, 3]) + b"\x00\x00\x00\x05")
    with pytest.raises(DataError, match="truncated idx header"):
        read_idx(path)


def test_wrong_magic(tmp_path):
    path = tmp_path / "png.gz"
    path.write_bytes(gzip.compress(b"\x89PNG\r\n\x1a\n" + bytes(100)))
    with pytest.raises(DataError, match=r"png\.gz: bad idx magic 89504e47"):
        read_idx(path)


def test_corrupt_gzip(tmp_path):
    path = tmp_path / "c.gz"
    path.write_bytes(gzip.compress(idx_bytes(fake_images(50)[0]))[:2000])
    with pytest.raises(DataError, match=r"c\.gz: corrupt or truncated gzip"):
        read_idx(path)


def test_missing_idx_file(tmp_path):
    with pytest.raises(DataError, match="cannot read"):
        read_idx(tmp_path / "nope.gz")


# --- read_npz_array -----------------------------------------------------------------------


def test_read_npz_array(tmp_path):
    np.savez_compressed(tmp_path / "a.npz", np.arange(5, dtype=np.uint8))
    assert (read_npz_array(tmp_path / "a.npz") == np.arange(5)).all()
    with pytest.raises(DataError, match=r"no array 'x' in the npz \(it has: arr_0\)"):
        read_npz_array(tmp_path / "a.npz", key="x")
    (tmp_path / "bad.npz").write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(DataError, match=r"bad\.npz: not a readable npz"):
        read_npz_array(tmp_path / "bad.npz")


def test_read_npz_refuses_pickles(tmp_path):
    np.savez(tmp_path / "o.npz", np.array([{"a": 1}], dtype=object))
    with pytest.raises(DataError, match="not a readable npz"):
        read_npz_array(tmp_path / "o.npz")


# --- load_images --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["mnist", "fashion_mnist"])
@pytest.mark.parametrize("split", ["train", "test"])
def test_load_idx_datasets(tmp_path, name, split):
    x, y = fake_images(12)
    names = images.file_names(name, split)
    assert names["images"].startswith("train" if split == "train" else "t10k")
    write_idx_pair(tmp_path / name, names, x, y)
    data = load_images(name, split, data_dir=tmp_path, download=False)
    assert data.x.dtype == np.uint8 and data.x.shape == (12, 28, 28)
    assert data.y.dtype == np.int64 and (data.y == y).all() and (data.x == x).all()
    assert (data.name, data.split, len(data)) == (name, split, 12)
    assert data.files == (tmp_path / name / names["images"], tmp_path / name / names["labels"])
    assert data.classes.tolist() == [0, 1, 2, 3, 4]


def test_plain_idx_files_accepted(tmp_path):
    x, y = fake_images(4)
    write_idx_pair(tmp_path / "mnist", images.file_names("mnist", "train"), x, y, compress=False)
    data = load_images("mnist", data_dir=tmp_path, download=False)
    assert data.files[0].name == "train-images-idx3-ubyte" and (data.x == x).all()


def test_data_dir_from_environment(tmp_path, monkeypatch):
    x, y = fake_images(3)
    write_idx_pair(tmp_path / "mnist", images.file_names("mnist", "test"), x, y)
    monkeypatch.setenv(sources.ENV_DATA_DIR, str(tmp_path))
    assert len(load_images("mnist", "test", download=False)) == 3


def test_count_mismatch(tmp_path):
    x, y = fake_images(6)
    write_idx_pair(tmp_path / "mnist", images.file_names("mnist", "train"), x, y[:5])
    with pytest.raises(DataError, match="6 images but 5 labels"):
        load_images("mnist", data_dir=tmp_path, download=False)


def test_wrong_image_shape(tmp_path):
    names = images.file_names("fashion_mnist", "test")
    write_idx_pair(
        tmp_path / "fashion_mnist", names, np.zeros((2, 32, 32), np.uint8), np.ones(2, np.uint8)
    )
    with pytest.raises(DataError, match=r"uint8 of shape \(n, 28, 28\), got uint8 \(2, 32, 32\)"):
        load_images("fashion_mnist", "test", data_dir=tmp_path, download=False)


def test_missing_files_name_file_and_url(tmp_path):
    with pytest.raises(DataError) as err:
        load_images("mnist", data_dir=tmp_path, download=False)
    message = str(err.value)
    assert "train-images-idx3-ubyte.gz" in message
    assert "https://storage.googleapis.com/cvdf-datasets/mnist/train-images-idx3-ubyte.gz" in (
        message
    )
    assert "yann.lecun.com" in message and "\n" not in message
    # the labels alone are missing: that file is named
    x, y = fake_images(2)
    write_idx_pair(tmp_path / "fashion_mnist", images.file_names("fashion_mnist", "test"), x, y)
    (tmp_path / "fashion_mnist" / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(DataError, match=r"t10k-labels-idx1-ubyte\.gz.*fashion-mnist\.s3"):
        load_images("fashion_mnist", "test", data_dir=tmp_path, download=False)


def test_unknown_name_and_split(tmp_path):
    with pytest.raises(DataError, match="unknown image dataset 'emnist'"):
        load_images("emnist", data_dir=tmp_path)
    with pytest.raises(DataError, match="unknown split 'val'"):
        load_images("mnist", "val", data_dir=tmp_path)


def test_every_file_downloaded_individually_and_checked(tmp_path, monkeypatch):
    """MNIST's files have the official sha256: a fixture served as the download is rejected."""
    x, y = fake_images(3)
    served = {}
    for role, array in (("images", x), ("labels", y)):
        source = images.file_source("mnist", "test", role)
        served[source.download.url] = gzip.compress(idx_bytes(array))
    requested = []

    def fake_urlopen(url, timeout=None):
        requested.append(url)
        return io.BytesIO(served[url])

    monkeypatch.setattr(sources.urllib.request, "urlopen", fake_urlopen)
    with pytest.raises(DataError, match="does not match the expected 8d422c7b"):
        load_images("mnist", "test", data_dir=tmp_path)
    assert requested == [images._MNIST_URL + "t10k-images-idx3-ubyte.gz"]
    assert list((tmp_path / "mnist").iterdir()) == []


def test_sources_table():
    for name in images.NAMES:
        for split in images.SPLITS:
            for role in ("images", "labels"):
                source = images.file_source(name, split, role)
                assert source.folder == name and source.download.url.startswith("http")
    assert images.file_source("kmnist", "test", "images").download.url == (
        "http://codh.rois.ac.jp/kmnist/dataset/kmnist/kmnist-test-imgs.npz"
    )
    assert images.file_source("kmnist", "train", "images").download.sha256 is None
    assert images.file_source("fashion_mnist", "train", "labels").download.url == (
        "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/train-labels-idx1-ubyte.gz"
    )
    emnist = images.file_source("emnist_digits", "test", "labels")
    assert emnist.candidates[-1] == "gzip.zip" and emnist.download.sha256 is None
    assert emnist.download.url == "https://biometrics.nist.gov/cs_links/EMNIST/gzip.zip"


# --- KMNIST -------------------------------------------------------------------------------


def write_kmnist(folder: Path, split: str, x, y, images_too: bool = True) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if images_too:
        np.savez_compressed(folder / f"kmnist-{split}-imgs.npz", x)
    np.savez_compressed(folder / f"kmnist-{split}-labels.npz", y)


def test_kmnist(tmp_path):
    x, y = fake_images(7)
    write_kmnist(tmp_path / "kmnist", "test", x, y)
    data = load_images("kmnist", "test", data_dir=tmp_path, download=False)
    assert (data.x == x).all() and (data.y == y).all() and data.y.dtype == np.int64


def test_kmnist_train_missing_says_only_test_present(tmp_path, monkeypatch):
    x, y = fake_images(7)
    write_kmnist(tmp_path / "kmnist", "test", x, y)
    write_kmnist(tmp_path / "kmnist", "train", None, np.zeros(60, np.uint8), images_too=False)
    with pytest.raises(DataError) as err:
        load_images("kmnist", "train", data_dir=tmp_path, download=False)
    message = str(err.value)
    assert "only the test split is present" in message and "split='test'" in message
    assert "http://codh.rois.ac.jp/kmnist/dataset/kmnist/kmnist-train-imgs.npz" in message

    def offline(*args, **kwargs):
        raise OSError("network unreachable")

    monkeypatch.setattr(sources.urllib.request, "urlopen", offline)
    with pytest.raises(DataError, match="only the test split.*network unreachable"):
        load_images("kmnist", "train", data_dir=tmp_path)


def test_kmnist_wrong_dtype(tmp_path):
    x, y = fake_images(3)
    write_kmnist(tmp_path / "kmnist", "test", x.astype(np.float32), y)
    with pytest.raises(DataError, match="must be uint8"):
        load_images("kmnist", "test", data_dir=tmp_path, download=False)


# --- EMNIST digits ------------------------------------------------------------------------


def test_emnist_from_official_zip_is_transposed_to_mnist_orientation(tmp_path):
    x, y = fake_images(9)
    folder = tmp_path / "emnist_digits"
    folder.mkdir()
    emnist_zip(folder / "gzip.zip", "train", x.transpose(0, 2, 1), y)  # as NIST stores them
    data = load_images("emnist_digits", "train", data_dir=tmp_path, download=False)
    assert (data.x == x).all() and (data.y == y).all()
    assert data.x.flags["C_CONTIGUOUS"] and data.files == (folder / "gzip.zip",)


def test_emnist_loose_files(tmp_path):
    x, y = fake_images(5)
    names = images.file_names("emnist_digits", "test")
    write_idx_pair(tmp_path / "emnist_digits", names, x.transpose(0, 2, 1), y)
    data = load_images("emnist_digits", "test", data_dir=tmp_path, download=False)
    assert (data.x == x).all()


def test_emnist_zip_without_the_split(tmp_path):
    folder = tmp_path / "emnist_digits"
    folder.mkdir()
    emnist_zip(folder / "gzip.zip", "train", *fake_images(2))
    with pytest.raises(DataError, match=r"gzip\.zip: no member 'gzip/emnist-digits-test-images"):
        load_images("emnist_digits", "test", data_dir=tmp_path, download=False)


def test_emnist_download_records_checksum(tmp_path, monkeypatch):
    x, y = fake_images(4)
    buffer = tmp_path / "served.zip"
    emnist_zip(buffer, "test", x.transpose(0, 2, 1), y)
    calls = []

    def fake_urlopen(url, timeout=None):
        calls.append(url)
        return io.BytesIO(buffer.read_bytes())

    monkeypatch.setattr(sources.urllib.request, "urlopen", fake_urlopen)
    data = load_images("emnist_digits", "test", data_dir=tmp_path)
    assert (data.x == x).all()
    assert calls == ["https://biometrics.nist.gov/cs_links/EMNIST/gzip.zip"]  # one download
    record = tmp_path / "emnist_digits" / "gzip.zip.sha256"
    assert record.read_text().split()[0] == sources.sha256_of(buffer)


# --- real data ----------------------------------------------------------------------------


@pytest.mark.real_data
def test_real_mnist_family(real_data):
    mnist = load_images("mnist", "train", data_dir=real_data, download=False)
    assert mnist.x.shape == (60000, 28, 28) and mnist.x.dtype == np.uint8
    counts = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
    assert np.bincount(mnist.y).tolist() == counts
    fashion = load_images("fashion_mnist", "train", data_dir=real_data, download=False)
    assert fashion.x.shape == (60000, 28, 28) and np.bincount(fashion.y).tolist() == [6000] * 10
    kmnist = load_images("kmnist", "test", data_dir=real_data, download=False)
    assert kmnist.x.shape == (10000, 28, 28) and np.bincount(kmnist.y).tolist() == [1000] * 10
    # the staged files are the official ones: their digests are the registered ones
    for data in (mnist, fashion, kmnist):
        for path in data.files:
            role = "images" if path == data.files[0] else "labels"
            expected = images.file_source(data.name, data.split, role).download.sha256
            assert sources.sha256_of(path) == expected
    with pytest.raises(DataError, match="only the test split is present"):
        load_images("kmnist", "train", data_dir=real_data, download=False)


# --- no open doors: non-finite values, damaged members ------------------------------------


def test_float_npz_with_nan_is_refused(tmp_path):
    x = np.zeros((2, 28, 28), np.float32)
    x[1, 3, 4] = np.nan
    x[0, 0, 0] = np.inf
    np.savez(tmp_path / "f.npz", x)
    with pytest.raises(DataError) as err:
        read_npz_array(tmp_path / "f.npz")
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 'f.npz'}: 2 non-finite values (nan/inf) in a float32")
    assert "the first inf at index (0, 0, 0)" in message
    np.savez(tmp_path / "ok.npz", np.ones(3, np.float64))  # finite floats are read as they are
    assert read_npz_array(tmp_path / "ok.npz").dtype == np.float64


def test_kmnist_float_images_with_nan_are_refused(tmp_path):
    x, y = fake_images(3)
    x = x.astype(np.float32)
    x[0, 0, 0] = np.nan
    write_kmnist(tmp_path / "kmnist", "test", x, y)
    with pytest.raises(DataError, match=r"kmnist-test-imgs\.npz: 1 non-finite value \(nan/inf\)"):
        load_images("kmnist", "test", data_dir=tmp_path, download=False)


def test_npy_instead_of_npz(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(3))
    (tmp_path / "a.npy").rename(tmp_path / "a.npz")
    with pytest.raises(DataError, match=r"a\.npz: not a readable npz file \(a single \.npy"):
        read_npz_array(tmp_path / "a.npz")


def test_float_idx_with_nan_is_refused(tmp_path):
    path = tmp_path / "f.idx"
    path.write_bytes(idx_bytes(np.array([0.5, np.nan], dtype=np.float32), code=0x0D))
    with pytest.raises(DataError, match=r"f\.idx: 1 non-finite value \(nan/inf\)"):
        read_idx(path)


def test_emnist_zip_with_damaged_member(tmp_path):
    folder = tmp_path / "emnist_digits"
    folder.mkdir()
    emnist_zip(folder / "gzip.zip", "test", *fake_images(20))
    member = "gzip/" + images.file_names("emnist_digits", "test")["images"]
    damage_zip_member(folder / "gzip.zip", member)
    with pytest.raises(DataError) as err:
        load_images("emnist_digits", "test", data_dir=tmp_path, download=False)
    message = str(err.value)
    assert message.startswith(f"{folder / 'gzip.zip'}: member '{member}' cannot be read (")
    assert "download it again from https://biometrics.nist.gov/" in message
