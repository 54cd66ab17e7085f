"""fedprune.data.uci_tabular: the ten UCI tables of Fed-HIRE, from tiny files in the official
formats (the two .xls workbooks included: a minimal BIFF8 writer below), and the real files."""

import io
import json
import struct
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from fedprune.data import sources, uci_tabular
from fedprune.data.uci_tabular import (
    PAPER_TABLE,
    TABLE_2_DIFFERENCES,
    TABULAR_NAMES,
    TARGETS,
    TabularDataset,
    file_sources,
    load_tabular,
    read_tabular,
)
from fedprune.errors import ConfigError, DataError

# --- a minimal .xls writer ----------------------------------------------------------------
# An .xls file is a BIFF8 "Workbook" stream inside an OLE2 compound file. The stream is a
# sequence of records (2-byte type, 2-byte length, data): the workbook globals (BOF, one
# BOUNDSHEET per sheet giving the stream offset of the sheet's BOF, EOF), then each sheet
# (BOF, LABEL/NUMBER cells, EOF). The compound file is a 512-byte header, one FAT sector,
# one directory sector (root entry + the "Workbook" stream) and the stream's sectors; the
# stream is padded to 4096 bytes so that it lives in regular sectors, not the mini stream.
# Enough for xlrd, which reads no formatting unless asked.

_END, _FREE, _FAT_SECTOR, _NO_STREAM = 0xFFFFFFFE, 0xFFFFFFFF, 0xFFFFFFFD, 0xFFFFFFFF


def _record(kind: int, data: bytes) -> bytes:
    return struct.pack("<HH", kind, len(data)) + data


def _bof(stream_type: int) -> bytes:  # BIFF8 (0x0600); 0x0005 globals, 0x0010 worksheet
    return _record(0x0809, struct.pack("<HHHHII", 0x0600, stream_type, 0, 1997, 0, 6))


def _string(text: str, length_format: str) -> bytes:  # uncompressed 8-bit characters
    raw = text.encode("latin-1")
    return struct.pack(length_format, len(raw)) + b"\x00" + raw


def _sheet_stream(rows: list) -> bytes:
    cells = []
    for r, row in enumerate(rows):
        for c, value in enumerate(row):
            if value is None:
                continue
            if isinstance(value, str):  # LABEL
                cells.append(_record(0x0204, struct.pack("<HHH", r, c, 0) + _string(value, "<H")))
            else:  # NUMBER
                cells.append(_record(0x0203, struct.pack("<HHHd", r, c, 0, value)))
    return _bof(0x0010) + b"".join(cells) + _record(0x000A, b"")


def biff8(sheets: dict) -> bytes:
    """The Workbook stream of ``{sheet name: rows}`` (a row: list of str / float / None)."""
    bodies = [_sheet_stream(rows) for rows in sheets.values()]

    def workbook_globals(offsets):
        bound = [
            _record(0x0085, struct.pack("<IBB", offset, 0, 0) + _string(name, "<B"))
            for name, offset in zip(sheets, offsets)
        ]
        return _bof(0x0005) + b"".join(bound) + _record(0x000A, b"")

    offsets, position = [], len(workbook_globals([0] * len(bodies)))
    for body in bodies:
        offsets.append(position)
        position += len(body)
    return workbook_globals(offsets) + b"".join(bodies)


def _directory_entry(name: str, kind: int, child: int, start: int, size: int) -> bytes:
    raw = (name + "\0").encode("utf-16-le")
    return (
        raw.ljust(64, b"\0")
        + struct.pack("<HBBIII", len(raw), kind, 1, _NO_STREAM, _NO_STREAM, child)
        + bytes(36)  # CLSID, state bits, creation and modification times
        + struct.pack("<III", start, size, 0)
    )


def xls_bytes(sheets: dict) -> bytes:
    """An .xls file (OLE2 compound file holding a BIFF8 workbook) of ``sheets``."""
    stream = biff8(sheets)
    stream = stream.ljust(max(len(stream), 4096), b"\0")
    count = -(-len(stream) // 512)
    fat = [_FAT_SECTOR, _END] + [3 + i for i in range(count - 1)] + [_END]
    assert len(fat) <= 128
    header = (
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
        + bytes(16)
        + struct.pack("<HHHHH", 0x3E, 3, 0xFFFE, 9, 6)
        + bytes(6)
        # directory sectors, FAT sectors, first directory sector, transaction, mini cutoff,
        # first mini FAT sector, mini FAT sectors, first DIFAT sector, DIFAT sectors
        + struct.pack("<9I", 0, 1, 1, 0, 4096, _END, 0, _END, 0)
        + struct.pack("<109I", 0, *[_FREE] * 108)
    )
    directory = (
        _directory_entry("Root Entry", 5, 1, _END, 0)
        + _directory_entry("Workbook", 2, _NO_STREAM, 2, len(stream))
        + bytes(256)
    )
    fat_sector = struct.pack("<128I", *fat, *[_FREE] * (128 - len(fat)))
    return header + fat_sector + directory + stream.ljust(count * 512, b"\0")


def test_the_xls_writer_is_read_by_xlrd():
    import xlrd

    book = xlrd.open_workbook(file_contents=xls_bytes({"S": [["a", None], [1.5, "b"]]}))
    sheet = book.sheet_by_name("S")
    assert (sheet.nrows, sheet.ncols) == (2, 2)
    assert sheet.cell_value(0, 0) == "a" and sheet.cell_type(0, 1) == xlrd.XL_CELL_EMPTY
    assert sheet.cell_value(1, 0) == 1.5 and sheet.cell_value(1, 1) == "b"


# --- fixtures: a few rows of each dataset in its official format --------------------------

ECOLI = (
    "AAT_ECOLI   0.49  0.29  0.48  0.50  0.56  0.24  0.35   cp\n"
    "ACEA_ECOLI  0.07  0.40  0.48  0.50  0.54  0.35  0.44   im\n"
    "YTFQ_ECOLI  0.74  0.74  0.48  0.50  0.31  0.53  0.52   imS\n"
)
YEAST = (
    "ADT1_YEAST  0.58  0.61  0.47  0.13  0.50  0.00  0.48  0.22  MIT\n"
    "ZUO1_YEAST  0.43  0.40  0.60  0.16  0.50  0.00  0.53  0.39  ERL\n"
    "G6PD_YEAST  0.65  0.54  0.54  0.13  0.50  0.00  0.53  0.22  CYT\n"
)
VEHICLE_CLASSES = ("opel", "saab", "bus ", "van ")  # 3-letter names end in a space


def vehicle_row(i: int) -> str:
    features = f"{90 + i} 48 83 178 72 10 162 42 20 159 176 379 184 70 6 16 187 197"
    return f"{features} {VEHICLE_CLASSES[i % 4]}\n"


HCV_HEADER = (
    "Age ,Gender,BMI,Fever,Nausea/Vomting,Headache ,Diarrhea ,Fatigue & generalized bone ache ,"
    "Jaundice ,Epigastric pain ,WBC,RBC,HGB,Plat,AST 1,ALT 1,ALT4,ALT 12,ALT 24,ALT 36,ALT 48,"
    "ALT after 24 w,RNA Base,RNA 4,RNA 12,RNA EOT,RNA EF,Baseline histological Grading,"
    "Baselinehistological staging"
)
HCV_ROWS = (
    "56,1,35,2,1,1,1,2,2,2,7425,4248807.00,14,112132.00,99,84,52.00,109,81,5,5,5,655330,634536,"
    "288194,5,5,13,2",
    "46,1,29,1,2,2,1,2,2,1,12101,4429425.00,10,129367.00,91,123,95.00,75,113,57,123,44,40620,"
    "538635,637056,336804,31085,4,4",
)
LANDSAT_TRN = (
    " ".join(str(80 + i) for i in range(36))
    + " 3\n"
    + " ".join(str(60 + i) for i in range(36))
    + " 1\n"
)
LANDSAT_TST = " ".join(str(40 + i) for i in range(36)) + " 7\n"
WINE_HEADER = (
    '"fixed acidity";"volatile acidity";"citric acid";"residual sugar";"chlorides";'
    '"free sulfur dioxide";"total sulfur dioxide";"density";"pH";"sulphates";"alcohol";"quality"'
)
WINE_RED = f"{WINE_HEADER}\n7.4;0.7;0;1.9;0.076;11;34;0.9978;3.51;0.56;9.4;5\n"
WINE_RED += "7.8;0.88;0;2.6;0.098;25;67;0.9968;3.2;0.68;9.8;3\n"
WINE_WHITE = f"{WINE_HEADER}\n7;0.27;0.36;20.7;0.045;45;170;1.001;3;0.45;8.8;9\n"
PENDIGITS_TRA = " 47,100, 27, 81, 57, 37, 26,  0,  0, 23, 56, 53,100, 90, 40, 98, 8\n"
PENDIGITS_TES = "  0, 89, 27,100, 42, 75, 29, 45, 15, 15, 37,  0, 69,  2,100,  6, 2\n"
LETTER = "T,2,8,3,5,1,8,13,0,6,6,10,8,0,8,0,8\nA,4,9,6,6,2,9,5,3,1,8,1,8,2,7,2,8\n"

UKM_HEADER = ["STG", "SCG", "STR", "LPR", "PEG", " UNS", None, None, "Attribute Information:"]


def ukm_sheets(training=None, test=None) -> dict:
    training = training or [
        [0.0, 0.0, 0.0, 0.0, 0.0, "very_low"],
        [0.08, 0.08, 0.1, 0.24, 0.9, "High"],
    ]
    test = test or [
        [0.0, 0.1, 0.5, 0.26, 0.05, "Very Low"],
        [0.05, 0.05, 0.55, 0.6, 0.14, "Low"],
        [0.08, 0.18, 0.63, 0.6, 0.85, "Middle"],
    ]
    note = [None] * 8 + ["STG (The degree of study time for goal object materails),"]
    return {
        "Information": [["Data Set Characteristics: Multivariate"], ["Number of Instances: 403"]],
        "Training_Data": [UKM_HEADER, *[row + note[6:] for row in training]],
        "Test_Data": [UKM_HEADER, *test],
    }


CTG_TITLES = uci_tabular._CTG_FEATURES + ("CLASS", "NSP")
CTG_COLUMNS = tuple(range(10, 31)) + (43, 45)


def ctg_sheets(records=None, tail=None) -> dict:
    """Sheet "Data" as in CTG.xls: column numbers, titles, records, a blank row, sums."""
    records = records or [
        ([120.0 + i for i in range(21)], 9.0, 2.0),
        ([132.0, 0.0064, 0.0] + [float(i) for i in range(18)], 6.0, 1.0),
        ([float(i) for i in range(21)], 10.0, 3.0),
    ]
    numbers, titles = [None] * 46, [None] * 46
    titles[:9] = ["b", "e", "AC", "FM", "UC", "DL", "DS", "DP", "DR"]
    for number, (column, title) in enumerate(zip(CTG_COLUMNS, CTG_TITLES), 1):
        numbers[column], titles[column] = float(number), title
    rows = [numbers, titles]
    for features, code, nsp in records:
        row = [240.0, 357.0] + [0.0] * 7 + [None] * 37
        for column, value in zip(CTG_COLUMNS, [*features, code, nsp]):
            row[column] = value
        rows.append(row)
    rows.append([None] * 46)  # the blank row after the records, then the column sums
    rows.append(tail or [None] * 14 + [3.0, 1.0, 4.0] + [None] * 29)
    return {"Description": [["Cardiotocographic data"]], "Data": rows, "Raw Data": [["FileName"]]}


def hcv_zip(csv: bytes, member: str = "HCV-Egy-Data.csv") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, text in ((member, csv), ("Discretization-Criteria.csv", CRITERIA)):
            # a fixed time: the same bytes in every test process (pytest-xdist compares them)
            info = zipfile.ZipInfo(name, date_time=(2019, 1, 1, 0, 0, 0))
            zf.writestr(info, text, compress_type=zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


CRITERIA = "Feature Names,Feature Values\n"


def hcv_csv(rows=HCV_ROWS) -> bytes:  # CRLF, no line end after the last row, as UCI's
    return "\r\n".join([HCV_HEADER, *rows]).encode()


def official_files() -> dict:
    """{dataset: {file name: bytes}} of the fixtures."""
    return {
        "ecoli": {"ecoli.data": ECOLI.encode()},
        "user_knowledge_modeling": {uci_tabular._UKM_FILE: xls_bytes(ukm_sheets())},
        "statlog_vehicle": {
            f"xa{c}.dat": vehicle_row(i).encode() for i, c in enumerate("abcdefghi")
        },
        "hcv_egypt": {"HCV-Egy-Data.zip": hcv_zip(hcv_csv())},
        "yeast": {"yeast.data": YEAST.encode()},
        "cardiotocography": {"CTG.xls": xls_bytes(ctg_sheets())},
        "statlog_landsat": {"sat.trn": LANDSAT_TRN.encode(), "sat.tst": LANDSAT_TST.encode()},
        "wine_quality": {
            "winequality-red.csv": WINE_RED.encode(),
            "winequality-white.csv": WINE_WHITE.encode(),
        },
        "pendigits": {
            "pendigits.tra": PENDIGITS_TRA.encode(),
            "pendigits.tes": PENDIGITS_TES.encode(),
        },
        "letter_recognition": {"letter-recognition.data": LETTER.encode()},
    }


# name -> (labels, first row of x): each expected value read off the fixture above
EXPECTED = {
    "ecoli": ([0, 1, 7], [0.49, 0.29, 0.48, 0.50, 0.56, 0.24, 0.35]),
    "user_knowledge_modeling": ([0, 3, 0, 1, 2], [0.0] * 5),
    "statlog_vehicle": (
        [i % 4 for i in range(9)],
        [90, 48, 83, 178, 72, 10, 162, 42, 20, 159, 176, 379, 184, 70, 6, 16, 187, 197],
    ),
    "hcv_egypt": (
        [1, 3],
        [56, 1, 35, 2, 1, 1, 1, 2, 2, 2, 7425, 4248807, 14, 112132, 99, 84, 52, 109, 81, 5, 5, 5]
        + [655330, 634536, 288194, 5, 5, 13],
    ),
    "yeast": ([2, 9, 0], [0.58, 0.61, 0.47, 0.13, 0.50, 0.00, 0.48, 0.22]),
    "cardiotocography": ([8, 5, 9], [120.0 + i for i in range(21)]),
    "statlog_landsat": ([2, 0, 5], [80 + i for i in range(36)]),
    "wine_quality": ([2, 0, 6], [7.4, 0.7, 0, 1.9, 0.076, 11, 34, 0.9978, 3.51, 0.56, 9.4]),
    "pendigits": ([8, 2], [47, 100, 27, 81, 57, 37, 26, 0, 0, 23, 56, 53, 100, 90, 40, 98]),
    "letter_recognition": ([19, 0], [2, 8, 3, 5, 1, 8, 13, 0, 6, 6, 10, 8, 0, 8, 0, 8]),
}


def write_dataset(data_dir: Path, name: str, **replace: bytes) -> Path:
    """The fixture files of ``name`` in ``<data_dir>/uci_tabular/<name>/``; ``replace`` maps
    a file name to other bytes (``None``: leave the file out)."""
    folder = data_dir / "uci_tabular" / name
    folder.mkdir(parents=True, exist_ok=True)
    files = official_files()[name]
    files.update(replace)
    for filename, raw in files.items():
        if raw is not None:
            (folder / filename).write_bytes(raw)
    return folder


# --- reading ------------------------------------------------------------------------------


def test_every_dataset_has_a_fixture_and_a_paper_row():
    assert set(official_files()) == set(EXPECTED) == set(TABULAR_NAMES) == set(PAPER_TABLE)
    assert list(PAPER_TABLE) == list(TABULAR_NAMES)


@pytest.mark.parametrize("name", TABULAR_NAMES)
def test_reads_the_official_format(tmp_path, name):
    write_dataset(tmp_path, name)
    data = load_tabular(name, tmp_path, download=False)
    labels, first = EXPECTED[name]
    assert isinstance(data, TabularDataset) and data.name == name
    assert data.x.dtype == np.float32 and data.y.dtype == np.int64
    assert (
        data.x.shape == (len(labels), PAPER_TABLE[name][1]) == (len(data), len(data.feature_names))
    )
    assert data.y.tolist() == labels
    np.testing.assert_array_equal(data.x[0], np.array(first, dtype=np.float32))
    assert data.num_classes == len(data.class_names) == PAPER_TABLE[name][2]
    assert data.x.flags.c_contiguous and np.isfinite(data.x).all()


def test_label_columns_and_class_names(tmp_path):
    for name in TABULAR_NAMES:
        write_dataset(tmp_path, name)

    def read(name, target=None):
        return load_tabular(name, tmp_path, download=False, target=target)

    assert read("ecoli").class_names == ("cp", "im", "pp", "imU", "om", "omL", "imL", "imS")
    assert read("ecoli").feature_names[0] == "mcg"  # the sequence name is dropped
    ukm = read("user_knowledge_modeling")  # 'very_low' (training) == 'Very Low' (test)
    assert ukm.class_names == ("very_low", "Low", "Middle", "High")
    assert ukm.feature_names == ("STG", "SCG", "STR", "LPR", "PEG")
    assert read("statlog_vehicle").class_names == ("opel", "saab", "bus", "van")
    hcv = read("hcv_egypt")
    assert (
        hcv.feature_names[0] == "Age" and hcv.feature_names[-1] == "Baseline histological Grading"
    )
    assert read("statlog_landsat").class_names == ("1", "2", "3", "4", "5", "7")
    assert read("wine_quality").class_names == ("3", "4", "5", "6", "7", "8", "9")
    assert read("letter_recognition").class_names[25] == "Z"
    nsp = read("cardiotocography", "NSP")
    assert nsp.class_names == ("1", "2", "3") and nsp.y.tolist() == [1, 0, 2]
    assert read("cardiotocography", "CLASS").y.tolist() == EXPECTED["cardiotocography"][0]
    assert TARGETS["cardiotocography"] == ("CLASS", "NSP")


def test_read_tabular_reads_a_folder(tmp_path):
    folder = write_dataset(tmp_path, "pendigits")
    assert read_tabular("pendigits", folder).y.tolist() == [8, 2]


def test_dataset_record_checks_its_arrays():
    x, y = np.zeros((2, 1), np.float32), np.zeros(2, np.int64)
    TabularDataset("t", x, y, ("a",), ("f",))
    with pytest.raises(DataError, match="float32"):
        TabularDataset("t", x.astype(np.float64), y, ("a",), ("f",))
    with pytest.raises(DataError, match="int64"):
        TabularDataset("t", x, y[:1], ("a",), ("f",))
    with pytest.raises(DataError, match="feature names"):
        TabularDataset("t", x, y, ("a",), ("f", "g"))
    with pytest.raises(DataError, match="labels outside 0..0"):
        TabularDataset("t", x, y + 1, ("a",), ("f",))


# --- where the files come from ------------------------------------------------------------


def test_file_sources_are_the_uci_files():
    verbatim = set(uci_tabular._SHA256)
    for name in TABULAR_NAMES:
        listed = file_sources(name)
        assert [s.download.filename for s in listed] == list(uci_tabular._SPECS[name].files)
        for source in listed:
            url = source.download.url
            assert url.startswith("https://archive.ics.uci.edu/ml/machine-learning-databases/")
            assert url.endswith("/" + source.download.filename.replace(" ", "%20"))
            assert source.folder == f"uci_tabular/{name}"
            assert source.homepage.startswith("https://archive.ics.uci.edu/dataset/")
            known = source.download.filename in verbatim
            assert (source.download.sha256 is not None) == known
    none = {s.download.filename for n in TABULAR_NAMES for s in file_sources(n)} - verbatim
    assert none == {f"xa{c}.dat" for c in "abcdefghi"} | {
        "sat.tst",
        "CTG.xls",
        uci_tabular._UKM_FILE,
    }


def test_missing_files_without_download_name_files_folder_and_urls(tmp_path):
    folder = write_dataset(tmp_path, "statlog_vehicle", **{"xae.dat": None, "xai.dat": None})
    with pytest.raises(DataError) as err:
        load_tabular("statlog_vehicle", tmp_path, download=False)
    message = str(err.value)
    assert "2 of its 9 files missing" in message and str(folder) in message
    assert (
        "xae.dat (https://archive.ics.uci.edu/ml/machine-learning-databases/statlog/vehicle/xae.dat)"
        in message
    )
    assert "xai.dat" in message and "xaa.dat" not in message and "--data-dir" in message
    assert "\n" not in message
    with pytest.raises(
        DataError, match=r"ecoli: 1 of its 1 file missing from .*ecoli.data \(https"
    ):
        read_tabular("ecoli", tmp_path / "nowhere")


def test_missing_data_dir_is_refused_and_not_created(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load_tabular("ecoli", tmp_path / "absent")
    assert not (tmp_path / "absent").exists()


def serve(monkeypatch, files: dict) -> list:
    """Answer urlopen with ``files`` (URL -> bytes); returns the URLs asked for."""
    asked = []

    def urlopen(url, timeout):
        asked.append(url)
        return io.BytesIO(files[url])

    monkeypatch.setattr(sources.urllib.request, "urlopen", urlopen)
    return asked


def test_download_fetches_missing_files_into_the_dataset_folder(tmp_path, monkeypatch, capsys):
    fixture = official_files()["statlog_vehicle"]
    listed = file_sources("statlog_vehicle")
    asked = serve(monkeypatch, {s.download.url: fixture[s.download.filename] for s in listed})
    data = load_tabular("statlog_vehicle", tmp_path)
    assert data.y.tolist() == EXPECTED["statlog_vehicle"][0]
    assert asked == [s.download.url for s in listed]
    folder = tmp_path / "uci_tabular" / "statlog_vehicle"
    assert (folder / "xaa.dat").read_bytes() == fixture["xaa.dat"]
    assert (folder / "xaa.dat.sha256").exists()  # no known digest: the first one is recorded
    # present files are not fetched again, and their recorded digest is enforced
    asked.clear()
    load_tabular("statlog_vehicle", tmp_path)
    assert asked == []
    (folder / "xab.dat").write_bytes(b"changed\n")
    with pytest.raises(DataError, match="changed since it was downloaded.*statlog/vehicle/xab.dat"):
        load_tabular("statlog_vehicle", tmp_path)


def test_download_is_checked_against_the_manifest_sha256(tmp_path, monkeypatch):
    (source,) = file_sources("ecoli")
    serve(monkeypatch, {source.download.url: ECOLI.encode()})  # not the UCI bytes
    with pytest.raises(DataError, match=f"{source.download.url}: sha256 .* does not match"):
        load_tabular("ecoli", tmp_path)
    assert list((tmp_path / "uci_tabular" / "ecoli").iterdir()) == []


def test_failed_download_names_the_url(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network unreachable")

    monkeypatch.setattr(sources.urllib.request, "urlopen", refuse)
    with pytest.raises(DataError, match="machine-learning-databases/00193/CTG.xls failed"):
        load_tabular("cardiotocography", tmp_path)


# --- bad input ----------------------------------------------------------------------------


def test_unknown_dataset_and_target_list_the_known_ones(tmp_path):
    with pytest.raises(ConfigError, match="unknown tabular dataset 'iris'; choose one of: ecoli, "):
        load_tabular("iris", tmp_path)
    with pytest.raises(ConfigError, match="letter_recognition"):
        read_tabular("iris", tmp_path)
    with pytest.raises(ConfigError, match="unknown tabular dataset"):
        file_sources("iris")
    with pytest.raises(ConfigError, match="unknown target 'colour'; choose one of: quality"):
        load_tabular("wine_quality", tmp_path, target="colour")
    with pytest.raises(ConfigError, match="choose one of: CLASS, NSP"):
        load_tabular("cardiotocography", tmp_path, target="class")


def _lines(text: str, number: int, new: str) -> bytes:
    lines = text.split("\n")
    lines[number - 1] = new
    return "\n".join(lines).encode()


LETTER_NAN = _lines(LETTER, 2, "A,nan,9,6,6,2,9,5,3,1,8,1,8,2,7,2,nan")

# (dataset, file, new bytes, expected message): one row per kind of malformed text file
BAD_TEXT = [
    (
        "ecoli",
        "ecoli.data",
        _lines(ECOLI, 2, "ACEA_ECOLI  0.07  0.40  0.48  0.50  0.54  0.35   im"),
        r"ecoli.data, line 2: expected 9 fields, found 8",
    ),
    (
        "ecoli",
        "ecoli.data",
        _lines(ECOLI, 2, "\n" + ECOLI.split("\n")[1]),
        r"line 2: blank line inside",
    ),
    ("ecoli", "ecoli.data", b"", r"ecoli.data: no data rows; download it again from https://"),
    ("ecoli", "ecoli.data", b"\xff\xfe\x00", r"ecoli.data: not a text table"),
    (
        "yeast",
        "yeast.data",
        _lines(YEAST, 3, YEAST.split("\n")[2].replace("CYT", "XYZ")),
        r"yeast.data, line 3: unknown class 'XYZ'; expected one of CYT, NUC, ",
    ),
    (
        "pendigits",
        "pendigits.tes",
        PENDIGITS_TES.replace(" 27,", " x,").encode(),
        r"pendigits.tes, line 1: field 3 'x' is not a number",
    ),
    (
        "letter_recognition",
        "letter-recognition.data",
        LETTER_NAN,
        r"letter-recognition.data, line 2: 'x-box' is nan, not a finite float32 \(2 such values in "
        r".*letter-recognition.data; .*download it again from https://archive",
    ),
    (
        "statlog_landsat",
        "sat.tst",
        LANDSAT_TST.replace("40 ", "1e39 ", 1).encode(),
        r"sat.tst, line 1: 'pixel1_band1' is 1e\+39, not a finite float32 \(1 such value in ",
    ),
    (
        "statlog_vehicle",
        "xag.dat",
        vehicle_row(6).replace("opel", "audi").replace("bus", "audi").encode(),
        r"xag.dat, line 1: unknown class 'audi'; expected one of opel, saab, bus, van",
    ),
    (
        "wine_quality",
        "winequality-white.csv",
        WINE_WHITE.replace('"quality"', '"Quality"').encode(),
        r"winequality-white.csv, line 1: header name 12 is 'Quality', expected 'quality'",
    ),
    (
        "wine_quality",
        "winequality-red.csv",
        WINE_RED.replace(";5\n", ";5;\n").encode(),
        r"winequality-red.csv, line 2: expected 12 fields, found 13",
    ),
    (
        "hcv_egypt",
        "HCV-Egy-Data.zip",
        hcv_zip(hcv_csv((HCV_ROWS[0], HCV_ROWS[1].replace(",12101,", ",inf,")))),
        r"HCV-Egy-Data.zip:HCV-Egy-Data.csv, line 3: 'WBC' is inf, not a finite float32",
    ),
    (
        "hcv_egypt",
        "HCV-Egy-Data.zip",
        hcv_zip(hcv_csv().replace(b"Age ,", b"Age,Sex,")),
        r"HCV-Egy-Data.csv, line 1: header has 30 names, the official file's 29",
    ),
    (
        "hcv_egypt",
        "HCV-Egy-Data.zip",
        hcv_zip(hcv_csv(), member="HCV.csv"),
        r"HCV-Egy-Data.zip: no members named 'HCV-Egy-Data.csv'.*00503/HCV-Egy-Data.zip",
    ),
    (
        "hcv_egypt",
        "HCV-Egy-Data.zip",
        hcv_zip(hcv_csv())[:100],
        r"HCV-Egy-Data.zip: not a readable zip archive .*truncated or corrupt",
    ),
]


def case_ids(cases: list[tuple]) -> list[str]:
    """Short test ids: the dataset, the file where there is one, and the case's place (the
    raw bytes would make ids hundreds of characters long)."""
    return ["-".join([*(str(part) for part in case[:-2]), str(i)]) for i, case in enumerate(cases)]


@pytest.mark.parametrize("name, filename, raw, message", BAD_TEXT, ids=case_ids(BAD_TEXT))
def test_malformed_text_files_name_file_and_line(tmp_path, name, filename, raw, message):
    write_dataset(tmp_path, name, **{filename: raw})
    with pytest.raises(DataError, match=message) as err:
        load_tabular(name, tmp_path, download=False)
    assert "\n" not in str(err.value)


def _ukm(**changes) -> bytes:
    return xls_bytes({**ukm_sheets(), **changes})


def _ctg(**kwargs) -> bytes:
    return xls_bytes(ctg_sheets(**kwargs))


def _renumbered() -> bytes:
    sheets = ctg_sheets()
    sheets["Data"][0][12] = 4.0
    return xls_bytes(sheets)


def _ctg_record(features=None, code=9.0, nsp=2.0) -> list:
    return [(features or [1.0] * 21, code, nsp)]


# (dataset, file bytes, expected message): one row per kind of malformed workbook
BAD_XLS = [
    (
        "user_knowledge_modeling",
        _ukm(Test_Data=ukm_sheets()["Test_Data"][:2] + [[0.05, 0.05, "abc", 0.6, 0.14, "Low"]]),
        r"sheet 'Test_Data', cell C3: expected a number, found 'abc'",
    ),
    (
        "user_knowledge_modeling",
        _ukm(Training_Data=[UKM_HEADER, [0.0, 0.0, 0.0, 0.0, 0.0, "Very High"]]),
        r"sheet 'Training_Data', cell F2: unknown class 'Very High'; expected one of very_low, ",
    ),
    (
        "user_knowledge_modeling",
        _ukm(Training_Data=[UKM_HEADER, [float("nan"), 0.0, 0.0, 0.0, 0.0, "Low"]]),
        r"sheet 'Training_Data', row 2: 'STG' is nan, not a finite float32 \(1 such value in "
        r".*KAHRAMAN.xls, sheet 'Training_Data'",
    ),
    (
        "user_knowledge_modeling",
        _ukm(Test_Data=[UKM_HEADER, [0.1] * 5 + ["Low"], [None] * 6, [0.2] * 5 + ["Low"]]),
        r"sheet 'Test_Data', cell A4: 0.2 below the blank row 3 that ends the table",
    ),
    (
        "user_knowledge_modeling",
        _ukm(Training_Data=[UKM_HEADER, [0.1] * 5 + [None]]),
        r"sheet 'Training_Data', cell F2: expected text, found an empty cell",
    ),
    (
        "user_knowledge_modeling",
        _ukm(Test_Data=[["STG", "SCG", "STR", "LPR", "PEG", "KNOW"]]),
        r"sheet 'Test_Data', row 1: header name 6 is 'KNOW', expected 'UNS'",
    ),
    (
        "user_knowledge_modeling",
        xls_bytes({k: v for k, v in ukm_sheets().items() if k != "Test_Data"}),
        r"KAHRAMAN.xls: no sheet 'Test_Data' \(it has: Information, Training_Data\)",
    ),
    ("cardiotocography", _renumbered(), r"sheet 'Data', cell M1: expected 3 \(column 3 is FM\)"),
    (
        "cardiotocography",
        _ctg(records=_ctg_record(code=9.5)),
        r"sheet 'Data', cell AR3: class code 9.5 is not an integer",
    ),
    (
        "cardiotocography",
        _ctg(records=_ctg_record(code=11.0)),
        r"sheet 'Data', cell AR3: unknown class '11'; expected one of 1, 2, ",
    ),
    (
        "cardiotocography",
        _ctg(records=_ctg_record(features=[1.0] * 20 + [1e39])),
        r"sheet 'Data', row 3: 'Tendency' is 1e\+39, not a finite float32",
    ),
    (
        "cardiotocography",
        _ctg(tail=[None] * 43 + [3.0]),
        r"sheet 'Data', cell AR7: 3.0 below the blank row 6 that ends the table",
    ),
    (
        "cardiotocography",
        _ctg(records=[([1.0] * 5 + [None] + [1.0] * 15, 1.0, 1.0)]),
        r"sheet 'Data', cell P3: expected a number, found an empty cell",
    ),
    ("cardiotocography", b"LB,AC,FM\n120,0,0\n", r"CTG.xls: not a readable .xls workbook"),
    ("cardiotocography", _ctg()[:1500], r"CTG.xls: not a readable .xls workbook .*00193/CTG.xls"),
]


@pytest.mark.parametrize("name, raw, message", BAD_XLS, ids=case_ids(BAD_XLS))
def test_malformed_workbooks_name_file_sheet_and_cell(tmp_path, name, raw, message):
    (filename,) = uci_tabular._SPECS[name].files
    write_dataset(tmp_path, name, **{filename: raw})
    with pytest.raises(DataError, match=message) as err:
        load_tabular(name, tmp_path, download=False)
    assert "\n" not in str(err.value)


def test_reading_xls_without_xlrd_says_what_to_install(tmp_path, monkeypatch):
    write_dataset(tmp_path, "cardiotocography")
    monkeypatch.setitem(sys.modules, "xlrd", None)  # import xlrd -> ImportError
    with pytest.raises(DataError, match=r"CTG.xls: reading .xls files needs xlrd.*xlrd==2.0.1"):
        load_tabular("cardiotocography", tmp_path, download=False)
    write_dataset(tmp_path, "ecoli")  # the text readers never import it
    assert len(load_tabular("ecoli", tmp_path, download=False)) == 3


# --- the real files -----------------------------------------------------------------------


@pytest.mark.real_data
def test_real_tables_match_fed_hire_table_2(real_data):
    """n, d, k* of every dataset equal Table 2, except the documented differences."""
    for name in TABULAR_NAMES:
        data = load_tabular(name, real_data, download=False)
        n, d = data.x.shape
        k = len(np.unique(data.y))
        expected, _cause = TABLE_2_DIFFERENCES.get(name, (PAPER_TABLE[name], ""))
        assert (n, d, k) == expected, name
        assert k == data.num_classes and np.isfinite(data.x).all()
    assert set(TABLE_2_DIFFERENCES) == {"statlog_vehicle"}
    assert PAPER_TABLE["statlog_vehicle"][0] == 845
    nsp = load_tabular("cardiotocography", real_data, download=False, target="NSP")
    assert np.bincount(nsp.y).tolist() == [1655, 295, 176]


@pytest.mark.real_data
def test_real_class_counts_match_the_names_files(real_data):
    def counts(name):
        return np.bincount(load_tabular(name, real_data, download=False).y).tolist()

    assert counts("ecoli") == [143, 77, 52, 35, 20, 5, 2, 2]  # ecoli.names
    assert counts("user_knowledge_modeling") == [50, 129, 122, 102]
    assert counts("statlog_vehicle") == [212, 217, 218, 199]  # opel, saab, bus, van
    assert counts("letter_recognition")[:3] == [789, 766, 736]  # letter-recognition.names


@pytest.mark.real_data
def test_known_sha256_equal_the_manifest(real_data):
    manifest = real_data / "manifest.json"
    if not manifest.exists():
        pytest.skip("no manifest.json beside the real data")
    listed = {f["path"]: f["sha256"] for f in json.loads(manifest.read_text())["files"]}
    for name in TABULAR_NAMES:
        for source in file_sources(name):
            path = f"uci_tabular/{name}/{source.download.filename}"
            assert path in listed
            if source.download.sha256 is not None:
                assert listed[path] == source.download.sha256
                assert sources.sha256_of(real_data / path) == source.download.sha256
