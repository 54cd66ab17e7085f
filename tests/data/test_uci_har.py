import zipfile

import numpy as np
import pytest

from fedprune.data import uci_har
from fedprune.errors import DataError
from tests.conftest import har_arrays, write_uci_har


@pytest.mark.parametrize("as_zip", [False, True])
def test_reads_official_layout(tmp_path, as_zip):
    x, y, subject = har_arrays()
    path = write_uci_har(tmp_path, x, y, subject, as_zip=as_zip)
    data = uci_har.read_uci_har(path)
    assert data.x.shape == (len(y), 128, 9) and data.x.dtype == np.float32
    np.testing.assert_allclose(data.x, x, rtol=1e-6)  # channel order kept
    np.testing.assert_array_equal(data.y, y - 1)  # labels 1-6 -> 0-5
    np.testing.assert_array_equal(data.subject, subject)
    assert data.channel_names[0] == "body_acc_x" and data.channel_names[-1] == "total_acc_z"


def test_reads_uci_repository_download_with_nested_zip(tmp_path, uci_har_zip):
    outer = tmp_path / "download.zip"
    with zipfile.ZipFile(outer, "w") as zf:
        zf.write(uci_har_zip, "UCI HAR Dataset.zip")
        zf.writestr("UCI HAR Dataset.names", "description")
    assert len(uci_har.read_uci_har(outer).y) == 54


def test_missing_signal_file_names_it(tmp_path):
    base = write_uci_har(tmp_path, *har_arrays())
    (base / "test" / "Inertial Signals" / "body_gyro_y_test.txt").unlink()
    with pytest.raises(DataError, match="body_gyro_y_test.txt"):
        uci_har.read_uci_har(base)


def test_short_line_reports_file_and_line(tmp_path):
    base = write_uci_har(tmp_path, *har_arrays())
    f = base / "train" / "Inertial Signals" / "total_acc_x_train.txt"
    lines = f.read_text().splitlines(keepends=True)
    lines[2] = lines[2][:-40] + "\r\n"
    f.write_text("".join(lines))
    with pytest.raises(DataError, match=r"total_acc_x_train.txt, line 3: expected 128"):
        uci_har.read_uci_har(base)


def test_row_count_mismatch(tmp_path):
    base = write_uci_har(tmp_path, *har_arrays())
    f = base / "train" / "y_train.txt"
    f.write_text(f.read_text() + "1\n")
    with pytest.raises(DataError, match="rows"):
        uci_har.read_uci_har(base)


def test_not_a_zip(tmp_path):
    bad = tmp_path / "UCI HAR Dataset.zip"
    bad.write_bytes(b"not a zip")
    with pytest.raises(DataError, match="not a readable zip"):
        uci_har.read_uci_har(bad)


@pytest.mark.real_data
def test_real_uci_har(real_data):
    data = uci_har.read_uci_har(real_data / "uci_har" / "UCI_HAR_Dataset.zip")
    assert data.x.shape == (10299, 128, 9)
    assert len(data.subjects) == 30
    assert np.bincount(data.y).tolist() == [1722, 1544, 1406, 1777, 1906, 1944]
    # first total_acc sample of the train set, as quoted in the dataset's documentation
    np.testing.assert_allclose(data.x[0, 0, 6:], [1.012817, -0.1232167, 0.1029341], rtol=1e-6)
