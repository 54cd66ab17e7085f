import re
import zipfile

import numpy as np
import pytest

from fedprune.data import uci_har
from fedprune.errors import DataError
from tests.conftest import damage_zip_member, har_arrays, write_uci_har


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


# --- no open doors: non-finite values, corrupt archives -----------------------------------


def _replace_value(path, line: int, token: str) -> None:
    """Put ``token`` (right-aligned, 16 wide as in the official files) as the 5th value of
    1-based ``line``."""
    lines = path.read_text().splitlines(keepends=True)
    row = lines[line - 1]
    lines[line - 1] = row[: 4 * 16] + f"{token:>16}" + row[5 * 16 :]
    path.write_text("".join(lines))


def test_nan_value_names_file_line_and_count(tmp_path):
    base = write_uci_har(tmp_path, *har_arrays())
    f = base / "train" / "Inertial Signals" / "body_gyro_z_train.txt"
    _replace_value(f, 4, "nan")
    with pytest.raises(DataError) as err:
        uci_har.read_uci_har(base)
    message = str(err.value)
    assert f"{f}, line 4: non-finite value 'nan' as float32 (1 non-finite value " in message
    assert "archive.ics.uci.edu" in message and "\n" not in message


@pytest.mark.parametrize("token", ["inf", "-Infinity", "1e39", "-3.5e+038"])
def test_values_not_finite_in_float32_are_refused(tmp_path, token):
    """1e39 is a valid float64 but inf in float32: the check runs after the cast."""
    x, y, subject = har_arrays()
    base = write_uci_har(tmp_path, x, y, subject)
    f = base / "test" / "Inertial Signals" / "total_acc_y_test.txt"
    _replace_value(f, 2, token)
    _replace_value(f, 7, token)
    with pytest.raises(DataError) as err:
        uci_har.read_uci_har(base)
    assert f"{f}, line 2: non-finite value {token!r} as float32 (2 non-finite" in str(err.value)


def test_largest_float32_is_accepted(tmp_path):
    base = write_uci_har(tmp_path, *har_arrays())
    f = base / "train" / "Inertial Signals" / "body_acc_x_train.txt"
    _replace_value(f, 1, "3.4028234e+38")
    data = uci_har.read_uci_har(base)
    assert data.x[0, 4, 0] == np.float32(3.4028234e38)


def test_non_finite_in_zip_names_archive_and_member(tmp_path):
    x, y, subject = har_arrays()
    x = x.astype(np.float64)
    x[len(y) // 2 + 1, 3, 0] = 1e39  # test split, second window, body_acc_x
    path = write_uci_har(tmp_path, x, y, subject, as_zip=True)
    with pytest.raises(DataError) as err:
        uci_har.read_uci_har(path)
    message = str(err.value)
    member = "UCI HAR Dataset/test/Inertial Signals/body_acc_x_test.txt"
    assert message.startswith(f"{path}:{member}, line 2: non-finite value '1.0000000e+39'")


def test_non_numeric_value_names_line_and_token(tmp_path):
    base = write_uci_har(tmp_path, *har_arrays())
    f = base / "train" / "Inertial Signals" / "body_acc_z_train.txt"
    _replace_value(f, 5, "1.2.3")
    with pytest.raises(DataError, match=re.escape(f"{f}, line 5: '1.2.3' is not a float32 number")):
        uci_har.read_uci_har(base)
    labels = base / "train" / "y_train.txt"
    labels.write_text(labels.read_text().replace("1\n", "1.5\n", 1))
    with pytest.raises(DataError, match=r"y_train\.txt, line 1: '1\.5' is not a int64 number"):
        uci_har.read_uci_har(base)


def test_crc_damaged_member_names_archive_member_and_url(tmp_path, uci_har_zip):
    member = "UCI HAR Dataset/train/Inertial Signals/body_gyro_x_train.txt"
    damage_zip_member(uci_har_zip, member)
    with pytest.raises(DataError) as err:
        uci_har.read_uci_har(uci_har_zip)
    message = str(err.value)
    assert message.startswith(f"{uci_har_zip}: member '{member}' cannot be read (Bad CRC-32")
    assert "download it again from https://archive.ics.uci.edu/" in message
    assert "\n" not in message


def test_damaged_member_of_nested_download(tmp_path, uci_har_zip):
    outer = tmp_path / "human+activity+recognition+using+smartphones.zip"
    with zipfile.ZipFile(outer, "w") as zf:
        zf.write(uci_har_zip, "UCI HAR Dataset.zip")
    damage_zip_member(outer, "UCI HAR Dataset.zip")
    with pytest.raises(DataError, match=r"member 'UCI HAR Dataset\.zip' cannot be read"):
        uci_har.read_uci_har(outer)


def test_truncated_zip_says_download_again(tmp_path, uci_har_zip):
    uci_har_zip.write_bytes(uci_har_zip.read_bytes()[:5000])
    with pytest.raises(DataError) as err:
        uci_har.read_uci_har(uci_har_zip)
    assert str(err.value).startswith(f"{uci_har_zip}: not a readable zip archive")
    assert "download it again" in str(err.value)


def test_empty_label_file(tmp_path):
    base = write_uci_har(tmp_path, *har_arrays())
    (base / "test" / "y_test.txt").write_text("")
    with pytest.raises(DataError, match=r"y_test\.txt: no labels"):
        uci_har.read_uci_har(base)
