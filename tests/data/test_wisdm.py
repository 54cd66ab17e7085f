import gzip
import io
import re
import tarfile

import numpy as np
import pytest

from fedprune.data import wisdm
from fedprune.errors import DataError
from tests.conftest import WISDM_TEXT


def test_parse_counts_malformed_and_keeps_the_rest():
    records, report = wisdm.parse_records(WISDM_TEXT)
    assert report.records == 12
    assert [line for line, _, _ in report.malformed] == [5, 12, 14]
    assert "unknown activity 'Flying'" in report.malformed[1][1]
    assert "3 malformed records skipped" in report.summary()
    # the two records sharing line 3 are both kept, in order
    np.testing.assert_allclose(records.xyz[2:4, 0], [0.3, 0.4], rtol=1e-6)
    assert records.user.tolist() == [1] * 8 + [2] * 4


def test_windows_stay_inside_user_activity_runs():
    records, _ = wisdm.parse_records(WISDM_TEXT)
    data = wisdm.window_records(records, window=3, step=1)
    # runs: walking 5 rows -> 3 windows, jogging 3 -> 1, sitting 4 -> 2
    assert data.x.shape == (6, 3, 3)
    assert data.y.tolist() == [0, 0, 0, 1, 4, 4]
    assert data.subject.tolist() == [1, 1, 1, 1, 2, 2]
    np.testing.assert_allclose(data.x[3, :, 0], [1.0, 1.1, 1.2], rtol=1e-6)


def test_step_two_and_short_runs():
    records, _ = wisdm.parse_records(WISDM_TEXT)
    data = wisdm.window_records(records, window=4, step=2)
    assert data.y.tolist() == [0, 4]  # jogging (3 rows) is too short


def test_no_window_fits():
    records, _ = wisdm.parse_records(WISDM_TEXT)
    with pytest.raises(DataError, match="200 rows long"):
        wisdm.window_records(records)


def test_empty_file():
    with pytest.raises(DataError, match="no well-formed"):
        wisdm.parse_records("garbage\n\n")


@pytest.mark.parametrize("kind", ["txt", "gz", "tar.gz"])
def test_reads_all_official_containers(tmp_path, kind):
    raw = WISDM_TEXT.encode()
    if kind == "txt":
        path = tmp_path / wisdm.RAW_NAME
        path.write_bytes(raw)
    elif kind == "gz":
        path = tmp_path / (wisdm.RAW_NAME + ".gz")
        path.write_bytes(gzip.compress(raw))
    else:
        path = tmp_path / "WISDM_ar_latest.tar.gz"
        with tarfile.open(path, "w:gz") as tar:
            info = tarfile.TarInfo(f"WISDM_ar_v1.1/{wisdm.RAW_NAME}")
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    assert wisdm.read_text(path) == WISDM_TEXT


def test_tar_without_raw_file(tmp_path):
    path = tmp_path / "WISDM_ar_latest.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("readme.txt")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(DataError, match="has no WISDM_ar_v1.1_raw.txt"):
        wisdm.read_text(path)


def test_corrupt_gzip(tmp_path):
    path = tmp_path / (wisdm.RAW_NAME + ".gz")
    path.write_bytes(b"\x1f\x8b\x08garbage")
    with pytest.raises(DataError, match="cannot read"):
        wisdm.read_text(path)


@pytest.mark.real_data
def test_real_wisdm(real_data):
    data, report = wisdm.read_wisdm(real_data / "wisdm" / "WISDM_ar_v1.1_raw_reconstructed.txt.gz")
    assert report.records == 1_082_400
    assert data.x.shape[1:] == (200, 3)
    assert len(data.subjects) == 36
    # 98.6 % of the rows give ~98.5 % of the paper's 10,591 windows
    assert 10_300 <= len(data.y) <= 10_591


# --- no open doors: non-finite values, corrupt or unsafe archives -------------------------


@pytest.mark.parametrize("value", ["1e39", "-3.5e38", "nan", "NaN", "inf", "-Infinity"])
def test_values_not_finite_in_float32_are_an_error_naming_line_and_value(value):
    """As in UCI-HAR and the tabular readers: corrupt, not a malformed line to skip
    (1e39 is finite in float64 but inf in float32)."""
    text = WISDM_TEXT.replace("1,Jogging,107,1.1,1.2,1.3;", f"1,Jogging,107,1.1,{value},1.3;")
    with pytest.raises(DataError) as err:
        wisdm.parse_records(text, "raw.txt")
    message = str(err.value)
    assert message.startswith(f"raw.txt, line 7: non-finite value {value!r} as float32 (1 record ")
    assert "the file is corrupt, download it again from https://www.cis.fordham.edu/" in message


def test_non_finite_values_are_counted_and_the_first_named():
    text = WISDM_TEXT.replace("1,Walking,103,0.4,0.5,0.6;", "1,Walking,103,0.4,inf,nan;")
    text = text.replace("2,Sitting,110,2.1,2.2,2.3;", "2,Sitting,110,2.1,2.2,1e40;")
    with pytest.raises(DataError, match=r"line 3: non-finite value 'inf' as float32 \(2 records "):
        wisdm.parse_records(text)


def test_largest_float32_is_kept():
    text = WISDM_TEXT.replace("1,Jogging,107,1.1,1.2,1.3;", "1,Jogging,107,3.4028234e38,0,0;")
    records, report = wisdm.parse_records(text)
    assert len(report.malformed) == 3 and records.xyz[6, 0] == np.float32(3.4028234e38)


def test_1e39_in_read_wisdm_names_the_file(tmp_path):
    path = tmp_path / wisdm.RAW_NAME
    path.write_text(WISDM_TEXT.replace("2,Sitting,110,2.1,2.2,2.3;", "2,Sitting,110,1e39,2.2,2.3;"))
    with pytest.raises(DataError, match=re.escape(f"{path}, line 11: non-finite value '1e39'")):
        wisdm.read_wisdm(path, window=2, step=1)


def _tar_with(path, extra: tarfile.TarInfo, raw_member: bool = True) -> None:
    raw = WISDM_TEXT.encode()
    with tarfile.open(path, "w:gz") as tar:
        if raw_member:
            info = tarfile.TarInfo(f"WISDM_ar_v1.1/{wisdm.RAW_NAME}")
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
        tar.addfile(extra)


@pytest.mark.parametrize(
    ("kind", "name", "expected"),
    [
        (tarfile.SYMTYPE, f"other/{wisdm.RAW_NAME}", "is a symbolic link (to '/etc/passwd')"),
        (tarfile.LNKTYPE, "WISDM_ar_v1.1/readme.txt", "is a hard link (to '/etc/passwd')"),
        (tarfile.CHRTYPE, "WISDM_ar_v1.1/dev", "is a device, fifo or other special file"),
        (tarfile.FIFOTYPE, "WISDM_ar_v1.1/fifo", "is a device, fifo or other special file"),
        (tarfile.REGTYPE, "../escape.txt", "is a path outside the archive"),
        (tarfile.REGTYPE, "/abs/readme.txt", "is a path outside the archive"),
    ],
)
def test_unsafe_tar_members_are_refused_by_name(tmp_path, kind, name, expected):
    path = tmp_path / "WISDM_ar_latest.tar.gz"
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = "/etc/passwd" if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE) else ""
    _tar_with(path, info)
    with pytest.raises(DataError) as err:
        wisdm.read_text(path)
    message = str(err.value)
    assert message.startswith(f"{path}: member {name!r} {expected}")
    assert "fordham.edu" in message and "\n" not in message


def test_symlink_named_like_the_raw_file_is_refused(tmp_path):
    """A link that would make tarfile read another member's bytes in place of the raw file."""
    path = tmp_path / "WISDM_ar_latest.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        data = tarfile.TarInfo("WISDM_ar_v1.1/readme.txt")
        data.size = 3
        tar.addfile(data, io.BytesIO(b"abc"))
        link = tarfile.TarInfo(f"WISDM_ar_v1.1/{wisdm.RAW_NAME}")
        link.type = tarfile.SYMTYPE
        link.linkname = "readme.txt"
        tar.addfile(link)
    with pytest.raises(DataError, match=rf"member 'WISDM_ar_v1.1/{wisdm.RAW_NAME}' is a symbolic"):
        wisdm.read_text(path)


def test_tar_with_two_raw_files_is_refused(tmp_path):
    path = tmp_path / "WISDM_ar_latest.tar.gz"
    info = tarfile.TarInfo(f"copy/{wisdm.RAW_NAME}")
    _tar_with(path, info)
    with pytest.raises(
        DataError, match=re.escape(f"{path}: the archive has 2 members {wisdm.RAW_NAME}")
    ):
        wisdm.read_text(path)


def test_apple_double_file_is_not_taken_for_the_raw_file(tmp_path):
    path = tmp_path / "WISDM_ar_latest.tar.gz"
    _tar_with(path, tarfile.TarInfo(f"__MACOSX/._{wisdm.RAW_NAME}"))
    assert wisdm.read_text(path) == WISDM_TEXT


@pytest.mark.parametrize("kind", ["gz", "tar.gz"])
def test_truncated_archive_names_file_and_url(tmp_path, kind):
    raw = WISDM_TEXT.encode() * 50
    if kind == "gz":
        path = tmp_path / (wisdm.RAW_NAME + ".gz")
        path.write_bytes(gzip.compress(raw)[:-20])
    else:
        path = tmp_path / "WISDM_ar_latest.tar.gz"
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            info = tarfile.TarInfo(f"WISDM_ar_v1.1/{wisdm.RAW_NAME}")
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
        path.write_bytes(buffer.getvalue()[: len(buffer.getvalue()) // 2])
    with pytest.raises(DataError) as err:
        wisdm.read_text(path)
    message = str(err.value)
    assert message.startswith(f"{path}: cannot read (")
    assert "truncated or corrupt: download it again from https://www.cis.fordham.edu/" in message
    assert "\n" not in message


def test_gzip_with_bad_crc(tmp_path):
    blob = bytearray(gzip.compress(WISDM_TEXT.encode()))
    blob[-8] ^= 0xFF  # the CRC-32 in the gzip trailer
    path = tmp_path / (wisdm.RAW_NAME + ".gz")
    path.write_bytes(bytes(blob))
    with pytest.raises(DataError, match=re.escape(f"{path}: cannot read (CRC check failed")):
        wisdm.read_text(path)


def test_float32_overflow_bound_is_exact():
    """The record check's bound is where numpy's float32 cast starts giving inf."""
    bound = wisdm.FLOAT32_OVERFLOW
    below = float(np.nextafter(bound, 0.0))
    with np.errstate(over="ignore"):
        assert np.isinf(np.float32(bound)) and np.isinf(np.float32(-bound))
        assert np.isfinite(np.float32(below)) and np.isfinite(np.float32(-below))
    line = f"1,Walking,1,{below!r},0,0;\n1,Walking,2,0,0,0;"
    assert wisdm.parse_records(line)[1].records == 2
    with pytest.raises(DataError, match="non-finite value"):
        wisdm.parse_records(f"1,Walking,1,{bound!r},0,0;\n1,Walking,2,0,0,0;")
