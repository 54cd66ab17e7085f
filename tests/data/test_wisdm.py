import gzip
import io
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
