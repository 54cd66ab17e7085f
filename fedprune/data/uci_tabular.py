"""The ten UCI tabular datasets of Fed-HIRE, read from their original files.

Fed-HIRE (Cai et al., "One-Shot Hierarchical Federated Clustering", §4.1) clusters ten tables:
"All real-world datasets are obtained from the UCI Machine Learning Repository (Dua and Graff,
2017). Detailed dataset statistics are shown in Table 2", whose caption reads "n, d, and k*
indicate the number of objects, the number of features, and the true number of clusters,
respectively".
:func:`load_tabular` returns each as a :class:`TabularDataset`: float32 features (n, d) and
int64 labels 0..k-1, the ground-truth clusters the clustering is scored against. Values are
those of the files: no scaling, no shuffling; rows in file order, files in the order given
below.

The files live in ``<data dir>/uci_tabular/<name>/`` (data dir: ``--data-dir`` >
``$FEDPRUNE_DATA_DIR`` > ``./data``, as for every dataset, see :mod:`fedprune.data.sources`)
under the names UCI gives them. A missing file is downloaded from its UCI location when
``download`` is true; :func:`file_sources` lists every file with its URL.

Interpretations, one per dataset (quoted from the dataset's ``.names`` file, or from the
document that stands in for it where the ``.names`` file is not staged)
---------------------------------------------------------------------------------------------

* ``ecoli`` - ``ecoli.data``, whitespace-separated. ecoli.names: "Number of Attributes. for
  E.coli dataset: 8 ( 7 predictive, 1 name )" and "1. Sequence Name: Accession number for the
  SWISS-PROT database": the name (first field) is dropped; the 7 scores mcg..alm2 are the
  features; the class is the last field ("Predicted Attribute: Localization site of
  protein."), classes in the order of ecoli.names "9. Class Distribution": cp, im, pp, imU,
  om, omL, imL, imS.
* ``user_knowledge_modeling`` - ``Data_User_Modeling_Dataset_Hamdi Tolga KAHRAMAN.xls``: the
  sheets "Training_Data" (258 rows) then "Test_Data" (145 rows), together the "Number of
  Instances: 403" of its "Information" sheet. Features STG, SCG, STR, LPR, PEG (columns A-E,
  "Number of Attributes: 5"); the class is column F, headed " UNS" ("UNS (The knowledge level
  of user)"). Training_Data spells the lowest level "very_low", Test_Data "Very Low"; they are
  one class (the Information sheet counts "Very Low: 50" = 24 + 26), named ``very_low``.
  Classes ordered very_low, Low, Middle, High. (The Information sheet's "high 130" is wrong:
  the sheets hold 102 High rows, and 50 + 129 + 122 + 102 is its "Total:403".) Columns G-I
  hold free-text attribute descriptions and are not read.
* ``statlog_vehicle`` - ``xaa.dat`` .. ``xai.dat`` (9 x 94 rows), space-separated: 18 integer
  features, then the class name. vehicle.doc (quoted from the UCI page): "NUMBER OF CLASSES 4
  OPEL, SAAB, BUS, VAN"; the files spell them in lower case with a trailing space after the
  3-letter names. Feature names follow vehicle.doc's list (compactness .. hollows_ratio).
* ``hcv_egypt`` - the CSV ``HCV-Egy-Data.csv`` inside the official ``HCV-Egy-Data.zip``,
  comma-separated with a header whose names carry trailing spaces (stripped here). The class
  is the last column, "Baselinehistological staging": the zip's Discretization-Criteria.csv
  describes it as "Baseline Histological ... Staging (Class Label)". It holds 1-4 (k* = 4).
  The other 28 columns are the features, "Baseline histological Grading" included (Table 2:
  d = 28).
* ``yeast`` - ``yeast.data`` like ecoli. yeast.names: "for Yeast dataset: 9 ( 8 predictive,
  1 name )": the sequence name is dropped; features mcg..nuc; class last, in the order of
  yeast.names "9. Class Distribution": CYT, NUC, MIT, ME3, ME2, ME1, EXC, VAC, POX, ERL.
* ``cardiotocography`` - ``CTG.xls``, sheet "Data", which the "Description" sheet names
  "Data (temporal features per unit time)" (the sheet "Raw Data" has the same 2126 records
  with AC, FM, UC, DL, DS, DP as counts over the segment instead of per second). The
  features are the 21 columns that the sheet numbers 1-21 in its first row (columns K-AE:
  LB, AC, FM, UC, DL, DS, DP, ASTV, MSTV, ALTV, MLTV, Width, Min, Max, Nmax, Nzeros, Mode,
  Mean, Median, Variance, Tendency), the 21 of the Description sheet's Kruskal-Wallis table
  ("DR is removed since p(K-W)=1"). The class is CLASS, "Class code (1 to 10) for classes A
  to SUSP", because Table 2 gives k* = 10 and NSP ("Normal=1; Suspect=2; Pathologic=3") has
  only 3; ``target="NSP"`` reads NSP instead. Records are the rows from the third to the
  first blank row; the rows after it are the sheet's column summaries (sums, maxima) and
  must have no CLASS or NSP.
* ``statlog_landsat`` - ``sat.trn`` then ``sat.tst`` (the train/test split is not kept),
  space-separated: 36 integer features then the class code. sat.doc (not staged; quoted from
  the UCI page) lists the classes 1 red soil, 2 cotton crop, 3 grey soil, 4 damp grey soil,
  5 soil with vegetation stubble, 6 mixture class (all types present), 7 very damp grey soil,
  and says "NB. There are no examples with class 6 in this dataset": six classes "1" .. "5",
  "7" (k* = 6). "In each line of data the four spectral values for the top-left pixel are
  given first followed by the four spectral values for the top-middle pixel and then those
  for the top-right pixel, and so on with the pixels read out in sequence left-to-right and
  top-to-bottom": features ``pixel{1..9}_band{1..4}``.
* ``wine_quality`` - ``winequality-red.csv`` then ``winequality-white.csv``, ';'-separated
  with a quoted header. winequality.names: "Number of Attributes: 11 + output attribute" and
  "Output variable (based on sensory data): 12 - quality (score between 0 and 10)". The class
  is quality, not the colour: Table 2 gives d = 11 (no colour feature) and k* = 7, the number
  of distinct quality scores in the two files (3 .. 9, the class names); red/white would be
  k = 2.
* ``pendigits`` - ``pendigits.tra`` then ``pendigits.tes``, comma-separated with padding
  spaces. pendigits.names (not staged; quoted from the UCI page): "All input attributes are
  integers in the range 0..100. The last attribute is the class code 0..9"; the inputs are the
  pen trajectory resampled to 8 points ("input vector size is 2*T", "T=8 gave the best
  trade-off"), features x1, y1, .., x8, y8.
* ``letter_recognition`` - ``letter-recognition.data``, comma-separated. letter-recognition
  .names: "1. lettr capital letter (26 values from A to Z)" is the FIRST field and the class;
  fields 2-17 (x-box .. yegvx) are the features.

Table 2 against these readers (``PAPER_TABLE``; checked on the real files by the tests): n,
d and k* agree for nine datasets. ``statlog_vehicle``: the nine UCI files hold 846 rows (9 x
94; bus 218, opel 212, saab 217, van 199), Table 2 lists n = 845. No row is malformed,
duplicated or incomplete, so none is dropped; the paper does not say which row it lost (a
loader that takes the first row for a header loses exactly one). See ``TABLE_2_DIFFERENCES``.

Download checks
---------------
A download is checked against the sha256 of the UCI file where the digest of a verbatim copy is
known. It is not for twelve files, whose digest is therefore not enforced (``None``: the first
download's digest is recorded and enforced afterwards, see :mod:`fedprune.data.sources`): the
nine ``xa?.dat`` (the copies we checked were re-encoded, CRLF -> LF), ``sat.tst`` (its copy was
reformatted) and the two ``.xls`` files (different copies differ in ~10-30 bytes of OLE
metadata, so byte identity with the UCI download cannot be proven). Refusing a genuine UCI
download because it differs from a re-encoded copy would be wrong.

Bad input
---------
Every problem is one :class:`~fedprune.errors.DataError` naming the file (and for a text file
its line, for a workbook its sheet and cell): a missing file (with its folder and UCI URL); a
line with the wrong number of fields, a field that is not a number, an unknown class, a
header that is not the official one, a blank line inside a table; a value that is not finite
*as float32* (``nan``, ``inf``, or a number such as ``1e39`` that overflows float32), with the
file's count of such values. Nothing is skipped or repaired. An unknown dataset name or
target is a :class:`~fedprune.errors.ConfigError` listing the known ones. ``.xls`` files are
read with ``xlrd`` (``requirements/stack.txt``), imported only when one is read.
"""

from __future__ import annotations

import dataclasses
import io
import os
import struct
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from types import ModuleType

import numpy as np

from fedprune.data import sources
from fedprune.data.names import TABULAR_NAMES
from fedprune.data.sources import DataSource, Download
from fedprune.errors import ConfigError, DataError

FOLDER = "uci_tabular"
"""Sub-folder of the data directory holding one folder per dataset."""

PAPER_TABLE: dict[str, tuple[int, int, int]] = {
    "ecoli": (336, 7, 8),
    "user_knowledge_modeling": (403, 5, 4),
    "statlog_vehicle": (845, 18, 4),
    "hcv_egypt": (1385, 28, 4),
    "yeast": (1484, 8, 10),
    "cardiotocography": (2126, 21, 10),
    "statlog_landsat": (6435, 36, 6),
    "wine_quality": (6497, 11, 7),
    "pendigits": (10992, 16, 10),
    "letter_recognition": (20000, 16, 26),
}
"""Fed-HIRE Table 2: (n, d, k*) per dataset, as printed."""

TABLE_2_DIFFERENCES: dict[str, tuple[tuple[int, int, int], str]] = {
    "statlog_vehicle": (
        (846, 18, 4),
        "the nine UCI files hold 846 rows (9 x 94), none malformed, duplicated or incomplete; "
        "Table 2 lists 845 without saying which row was left out",
    ),
}
"""Where the readers' (n, d, k) differ from :data:`PAPER_TABLE`: ours, and the cause."""

_UCI_FILES = "https://archive.ics.uci.edu/ml/machine-learning-databases/"


@dataclasses.dataclass(frozen=True, eq=False)
class TabularDataset:
    """One UCI table: every row, before any federated partition.

    Attributes
    ----------
    name : dataset name, one of :data:`TABULAR_NAMES`.
    x : float32 array (n, d), finite, in the units of the file.
    y : int64 array (n,): class index in ``[0, len(class_names))``.
    class_names : the class labels as the file writes them, indexed by class.
    feature_names : one per column of ``x``.
    """

    name: str
    x: np.ndarray
    y: np.ndarray
    class_names: tuple[str, ...]
    feature_names: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.x.ndim != 2 or self.x.dtype != np.float32:
            raise DataError(
                f"{self.name}: x must be a 2-d float32 array, got {self.x.dtype} {self.x.shape}"
            )
        if self.y.ndim != 1 or self.y.dtype != np.int64 or len(self.y) != len(self.x):
            raise DataError(
                f"{self.name}: y must be int64 of shape ({len(self.x)},), got "
                f"{self.y.dtype} {self.y.shape}"
            )
        if self.x.shape[1] != len(self.feature_names):
            raise DataError(
                f"{self.name}: x has {self.x.shape[1]} columns but "
                f"{len(self.feature_names)} feature names"
            )
        if len(self.y) and (self.y.min() < 0 or self.y.max() >= len(self.class_names)):
            raise DataError(f"{self.name}: labels outside 0..{len(self.class_names) - 1}")

    def __len__(self) -> int:
        return len(self.y)

    @property
    def num_classes(self) -> int:
        """Number of classes named (all occur in the real files)."""
        return len(self.class_names)


@dataclasses.dataclass(frozen=True)
class _Classes:
    """A class column: its labels in class order and other spellings of the same labels."""

    names: tuple[str, ...]
    aliases: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def index(self, label: str, where: str) -> int:
        label = label.strip()
        try:
            return self.names.index(self.aliases.get(label, label))
        except ValueError:
            raise DataError(
                f"{where}: unknown class {label!r}; expected one of {', '.join(self.names)}"
            ) from None


_Reader = Callable[[str, Sequence[Path], str], tuple[np.ndarray, np.ndarray]]
"""``read(name, paths, target) -> (x, y)``: one dataset's files, in order, to arrays."""


@dataclasses.dataclass(frozen=True)
class _Spec:
    """What UCI publishes for one dataset and how its files are read."""

    uci_id: int
    directory: str  # under machine-learning-databases/
    files: tuple[str, ...]  # read in this order
    features: tuple[str, ...]
    targets: Mapping[str, _Classes]  # the first one is the paper's
    read: _Reader

    @property
    def homepage(self) -> str:
        return f"https://archive.ics.uci.edu/dataset/{self.uci_id}"


# --- reading helpers ----------------------------------------------------------------------


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def _hint(name: str, path: Path) -> str:
    """How to get ``path`` (one of ``name``'s files) again."""
    for source in file_sources(name):
        if source.download.filename == path.name:
            return f"download it again from {source.download.url}"
    return f"download it again (see {_SPECS[name].homepage})"


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise DataError(f"{path}: cannot read ({err.strerror or _one_line(err)})") from None


def _float32(
    values: list[list[float]],
    where: str,
    row_place: Callable[[int], str],
    features: Sequence[str],
    hint: str,
) -> np.ndarray:
    """``values`` as float32 (n, d); a value not finite *after* the cast is one DataError.

    ``row_place(i)`` names row ``i`` (its line or cell) and ``where`` the file.
    """
    wide = np.array(values, dtype=np.float64).reshape(len(values), len(features))
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported below
        x = wide.astype(np.float32)
    bad = ~np.isfinite(x)
    if bad.any():
        row, column = (int(i) for i in np.argwhere(bad)[0])
        count = int(bad.sum())
        raise DataError(
            f"{row_place(row)}: {features[column]!r} is {wide[row, column]:g}, not a finite "
            f"float32 ({count} such value{'s' if count > 1 else ''} in {where}; nan, inf and "
            f"numbers beyond +-3.4e38 are not measurements): the file is corrupt, {hint}"
        )
    return x


@dataclasses.dataclass(frozen=True)
class _Text:
    """The layout of a delimited text table."""

    fields: int
    label: int  # field index of the class
    sep: str | None = None  # None: runs of whitespace
    drop: tuple[int, ...] = ()  # fields that are neither feature nor class (sequence names)
    header: tuple[str, ...] | None = None  # the first line's names (quotes, spaces stripped)

    def feature_fields(self) -> list[int]:
        return [i for i in range(self.fields) if i != self.label and i not in self.drop]

    def split(self, line: str) -> list[str]:
        if self.sep is None:
            return line.split()
        return [token.strip() for token in line.split(self.sep)]


def _parse_text(
    raw: bytes, where: str, layout: _Text, classes: _Classes, features: Sequence[str], hint: str
) -> tuple[np.ndarray, np.ndarray]:
    """(x float32, y int64) of one text table; every malformed line is a DataError."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataError(
            f"{where}: not a text table (undecodable byte at offset {err.start}); {hint}"
        ) from None
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    while lines and not lines[-1].strip():
        lines.pop()
    first = 0
    if layout.header is not None and lines:
        _check_header(layout.split(lines[0]), layout.header, f"{where}, line 1")
        first = 1
    columns = layout.feature_fields()
    values: list[list[float]] = []
    labels: list[int] = []
    numbers: list[int] = []
    for number, line in enumerate(lines[first:], first + 1):
        place = f"{where}, line {number}"
        if not line.strip():
            raise DataError(f"{place}: blank line inside the table")
        tokens = layout.split(line)
        if len(tokens) != layout.fields:
            raise DataError(f"{place}: expected {layout.fields} fields, found {len(tokens)}")
        labels.append(classes.index(tokens[layout.label], place))
        try:
            values.append([float(tokens[i]) for i in columns])
        except ValueError:
            field = next(i for i in columns if not _is_number(tokens[i]))
            raise DataError(
                f"{place}: field {field + 1} {tokens[field]!r} is not a number"
            ) from None
        numbers.append(number)
    if not values:
        raise DataError(f"{where}: no data rows; {hint}")
    x = _float32(values, where, lambda i: f"{where}, line {numbers[i]}", features, hint)
    return x, np.array(labels, dtype=np.int64)


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def _check_header(found: Sequence[str], expected: Sequence[str], place: str) -> None:
    found = [name.strip().strip('"').strip() for name in found]
    if len(found) != len(expected):
        raise DataError(
            f"{place}: header has {len(found)} names, the official file's {len(expected)}"
        )
    for i, (have, want) in enumerate(zip(found, expected)):
        if have != want:
            raise DataError(f"{place}: header name {i + 1} is {have!r}, expected {want!r}")


def _text_reader(layout: _Text) -> _Reader:
    """A reader of ``layout`` text files, one after another."""

    def read(name: str, paths: Sequence[Path], target: str) -> tuple[np.ndarray, np.ndarray]:
        spec = _SPECS[name]
        parts = [
            _parse_text(
                _read_bytes(path),
                str(path),
                layout,
                spec.targets[target],
                spec.features,
                _hint(name, path),
            )
            for path in paths
        ]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    return read


def _read_hcv(name: str, paths: Sequence[Path], target: str) -> tuple[np.ndarray, np.ndarray]:
    """``HCV-Egy-Data.csv`` out of the official zip (the one member with that name)."""
    (archive,) = paths
    spec, hint = _SPECS[name], _hint(name, archive)
    try:
        with zipfile.ZipFile(archive) as zf:
            members = [n for n in zf.namelist() if PurePosixPath(n).name == _HCV_MEMBER]
            if len(members) != 1:
                raise DataError(
                    f"{archive}: {len(members) or 'no'} members named {_HCV_MEMBER!r} (expected "
                    f"one); not the official archive, {hint}"
                )
            raw = zf.read(members[0])
    except DataError:
        raise
    except sources.ZIP_ERRORS as err:
        raise DataError(
            f"{archive}: not a readable zip archive ({_one_line(err)}); it is truncated or "
            f"corrupt, {hint}"
        ) from None
    layout = _Text(fields=29, label=28, sep=",", header=_HCV_FEATURES + (_HCV_TARGET,))
    return _parse_text(
        raw, f"{archive}:{members[0]}", layout, spec.targets[target], spec.features, hint
    )


# --- .xls ---------------------------------------------------------------------------------


def _open_workbook(path: Path, hint: str) -> tuple[object, ModuleType]:
    """(xlrd workbook, the xlrd module); xlrd is imported here, when an .xls is read."""
    try:
        import xlrd
        from xlrd.compdoc import CompDocError
    except ImportError:
        raise DataError(
            f"{path}: reading .xls files needs xlrd, which is not installed "
            "(pip install xlrd==2.0.1; see requirements/stack.txt)"
        ) from None
    raw = _read_bytes(path)
    try:  # what xlrd raises on a damaged or foreign file
        book = xlrd.open_workbook(file_contents=raw, logfile=io.StringIO())
    except (
        xlrd.XLRDError,
        CompDocError,
        struct.error,
        IndexError,
        KeyError,
        ValueError,
        TypeError,
        AssertionError,
    ) as err:
        raise DataError(
            f"{path}: not a readable .xls workbook ({_one_line(err)}); {hint}"
        ) from None
    return book, xlrd


class _Sheet:
    """One worksheet of an ``.xls`` workbook, naming its cells in errors as Excel does."""

    def __init__(self, book: object, xlrd: ModuleType, path: Path, name: str, hint: str):
        if name not in book.sheet_names():
            raise DataError(
                f"{path}: no sheet {name!r} (it has: {', '.join(book.sheet_names())}); "
                f"not the official file, {hint}"
            )
        self.sheet = book.sheet_by_name(name)
        self.xlrd = xlrd
        self.where = f"{path}, sheet {name!r}"
        self.hint = hint

    def place(self, row: int, column: int | None = None) -> str:
        """``<file>, sheet 'S', cell F7`` (or ``row 7``), 1-based as Excel shows it."""
        if column is None:
            return f"{self.where}, row {row + 1}"
        return f"{self.where}, cell {self.xlrd.colname(column)}{row + 1}"

    def cell(self, row: int, column: int) -> tuple[int, object]:
        """(xlrd cell type, value); outside the used range an empty cell."""
        if row >= self.sheet.nrows or column >= self.sheet.ncols:
            return self.xlrd.XL_CELL_EMPTY, ""
        cell = self.sheet.cell(row, column)
        return cell.ctype, cell.value

    def empty(self, row: int, column: int) -> bool:
        kind, value = self.cell(row, column)
        blank = (self.xlrd.XL_CELL_EMPTY, self.xlrd.XL_CELL_BLANK)
        return kind in blank or (kind == self.xlrd.XL_CELL_TEXT and not str(value).strip())

    def describe(self, row: int, column: int) -> str:
        kind, value = self.cell(row, column)
        if self.empty(row, column):
            return "an empty cell"
        if kind in (self.xlrd.XL_CELL_TEXT, self.xlrd.XL_CELL_NUMBER):
            return repr(value)
        return {
            self.xlrd.XL_CELL_DATE: "a date",
            self.xlrd.XL_CELL_BOOLEAN: "a boolean",
            self.xlrd.XL_CELL_ERROR: "an error value",
        }.get(kind, f"a cell of xlrd type {kind}")

    def number(self, row: int, column: int) -> float:
        kind, value = self.cell(row, column)
        if kind != self.xlrd.XL_CELL_NUMBER:
            raise DataError(
                f"{self.place(row, column)}: expected a number, found {self.describe(row, column)}"
            )
        return float(value)

    def text(self, row: int, column: int) -> str:
        kind, value = self.cell(row, column)
        if kind != self.xlrd.XL_CELL_TEXT or not str(value).strip():
            raise DataError(
                f"{self.place(row, column)}: expected text, found {self.describe(row, column)}"
            )
        return str(value).strip()

    def code(self, row: int, column: int) -> str:
        """An integer class code stored as a number (``9.0`` -> ``"9"``)."""
        value = self.number(row, column)
        if not value.is_integer():
            raise DataError(f"{self.place(row, column)}: class code {value:g} is not an integer")
        return str(int(value))

    def records(self, first: int, columns: Sequence[int], guard: Sequence[int]) -> range:
        """Rows ``first`` .. up to the first row whose ``columns`` are all empty.

        Every later row must have ``guard`` empty: a record below a blank row, which would
        otherwise end the table early without a word, is refused.
        """
        end = first
        while end < self.sheet.nrows and not all(self.empty(end, c) for c in columns):
            end += 1
        for row in range(end, self.sheet.nrows):
            filled = [c for c in guard if not self.empty(row, c)]
            if filled:
                raise DataError(
                    f"{self.place(row, filled[0])}: {self.describe(row, filled[0])} below the "
                    f"blank row {end + 1} that ends the table; records must be contiguous"
                )
        if end == first:
            raise DataError(f"{self.where}: no records from row {first + 1} on; {self.hint}")
        return range(first, end)

    def table(
        self,
        rows: range,
        features: Sequence[int],
        names: Sequence[str],
        label: Callable[[int], str],
        classes: _Classes,
        label_column: int,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(x float32, y int64) of ``rows``: numbers in ``features``, ``label(row)`` the class."""
        values = [[self.number(r, c) for c in features] for r in rows]
        labels = [classes.index(label(r), self.place(r, label_column)) for r in rows]
        x = _float32(values, self.where, lambda i: self.place(rows[i]), names, self.hint)
        return x, np.array(labels, dtype=np.int64)


def _read_ukm(name: str, paths: Sequence[Path], target: str) -> tuple[np.ndarray, np.ndarray]:
    """The sheets Training_Data then Test_Data: STG..PEG in A-E, the class (' UNS') in F."""
    (path,) = paths
    spec, hint = _SPECS[name], _hint(name, path)
    book, xlrd = _open_workbook(path, hint)
    columns = list(range(len(spec.features) + 1))
    parts = []
    for sheet_name in _UKM_SHEETS:
        sheet = _Sheet(book, xlrd, path, sheet_name, hint)
        header = [sheet.text(0, c) for c in columns]
        _check_header(header, spec.features + ("UNS",), sheet.place(0))
        rows = sheet.records(1, columns, guard=columns)
        label_column = columns[-1]
        parts.append(
            sheet.table(
                rows,
                columns[:-1],
                spec.features,
                lambda r, s=sheet, c=label_column: s.text(r, c),
                spec.targets[target],
                label_column,
            )
        )
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _read_ctg(name: str, paths: Sequence[Path], target: str) -> tuple[np.ndarray, np.ndarray]:
    """Sheet "Data": features numbered 1-21 in row 1 (K-AE), CLASS (AR) and NSP (AT)."""
    (path,) = paths
    spec, hint = _SPECS[name], _hint(name, path)
    book, xlrd = _open_workbook(path, hint)
    sheet = _Sheet(book, xlrd, path, _CTG_SHEET, hint)
    titles = spec.features + _CTG_TARGETS
    for number, (column, title) in enumerate(zip(_CTG_COLUMNS, titles), 1):
        for row, expected in ((0, (xlrd.XL_CELL_NUMBER, number)), (1, (xlrd.XL_CELL_TEXT, title))):
            if sheet.cell(row, column) != expected:
                raise DataError(
                    f"{sheet.place(row, column)}: expected {expected[1]!r} (column {number} is "
                    f"{title}), found {sheet.describe(row, column)}; not the official CTG.xls, "
                    f"{hint}"
                )
    features = list(_CTG_COLUMNS[: len(spec.features)])
    label_column = _CTG_COLUMNS[len(spec.features) + _CTG_TARGETS.index(target)]
    rows = sheet.records(2, features + [label_column], guard=_CTG_COLUMNS[-2:])
    return sheet.table(
        rows,
        features,
        spec.features,
        lambda r: sheet.code(r, label_column),
        spec.targets[target],
        label_column,
    )


# --- the ten datasets ---------------------------------------------------------------------

_ECOLI_FEATURES = ("mcg", "gvh", "lip", "chg", "aac", "alm1", "alm2")
_YEAST_FEATURES = ("mcg", "gvh", "alm", "mit", "erl", "pox", "vac", "nuc")
_UKM_FILE = "Data_User_Modeling_Dataset_Hamdi Tolga KAHRAMAN.xls"
_UKM_SHEETS = ("Training_Data", "Test_Data")
_VEHICLE_FILES = tuple(f"xa{c}.dat" for c in "abcdefghi")
_VEHICLE_FEATURES = (
    "compactness",
    "circularity",
    "distance_circularity",
    "radius_ratio",
    "pr_axis_aspect_ratio",
    "max_length_aspect_ratio",
    "scatter_ratio",
    "elongatedness",
    "pr_axis_rectangularity",
    "max_length_rectangularity",
    "scaled_variance_major",
    "scaled_variance_minor",
    "scaled_radius_of_gyration",
    "skewness_about_major",
    "skewness_about_minor",
    "kurtosis_about_minor",
    "kurtosis_about_major",
    "hollows_ratio",
)
_HCV_MEMBER = "HCV-Egy-Data.csv"
_HCV_TARGET = "Baselinehistological staging"
_HCV_FEATURES = (
    "Age",
    "Gender",
    "BMI",
    "Fever",
    "Nausea/Vomting",
    "Headache",
    "Diarrhea",
    "Fatigue & generalized bone ache",
    "Jaundice",
    "Epigastric pain",
    "WBC",
    "RBC",
    "HGB",
    "Plat",
    "AST 1",
    "ALT 1",
    "ALT4",
    "ALT 12",
    "ALT 24",
    "ALT 36",
    "ALT 48",
    "ALT after 24 w",
    "RNA Base",
    "RNA 4",
    "RNA 12",
    "RNA EOT",
    "RNA EF",
    "Baseline histological Grading",
)
_CTG_SHEET = "Data"
_CTG_FEATURES = (
    "LB",
    "AC",
    "FM",
    "UC",
    "DL",
    "DS",
    "DP",
    "ASTV",
    "MSTV",
    "ALTV",
    "MLTV",
    "Width",
    "Min",
    "Max",
    "Nmax",
    "Nzeros",
    "Mode",
    "Mean",
    "Median",
    "Variance",
    "Tendency",
)
_CTG_TARGETS = ("CLASS", "NSP")
# Columns (0-based) of the features numbered 1-21 (K-AE), CLASS (AR, "22") and NSP (AT, "23").
_CTG_COLUMNS = tuple(range(10, 31)) + (43, 45)
_WINE_FILES = ("winequality-red.csv", "winequality-white.csv")
_WINE_FEATURES = (
    "fixed acidity",
    "volatile acidity",
    "citric acid",
    "residual sugar",
    "chlorides",
    "free sulfur dioxide",
    "total sulfur dioxide",
    "density",
    "pH",
    "sulphates",
    "alcohol",
)
_LETTER_FEATURES = (
    "x-box",
    "y-box",
    "width",
    "high",
    "onpix",
    "x-bar",
    "y-bar",
    "x2bar",
    "y2bar",
    "xybar",
    "x2ybr",
    "xy2br",
    "x-ege",
    "xegvy",
    "y-ege",
    "yegvx",
)


def _codes(first: int, last: int, skip: tuple[int, ...] = ()) -> tuple[str, ...]:
    return tuple(str(i) for i in range(first, last + 1) if i not in skip)


_SPECS: dict[str, _Spec] = {
    "ecoli": _Spec(
        uci_id=39,
        directory="ecoli",
        files=("ecoli.data",),
        features=_ECOLI_FEATURES,
        targets={"site": _Classes(("cp", "im", "pp", "imU", "om", "omL", "imL", "imS"))},
        read=_text_reader(_Text(fields=9, label=8, drop=(0,))),
    ),
    "user_knowledge_modeling": _Spec(
        uci_id=257,
        directory="00257",
        files=(_UKM_FILE,),
        features=("STG", "SCG", "STR", "LPR", "PEG"),
        targets={"UNS": _Classes(("very_low", "Low", "Middle", "High"), {"Very Low": "very_low"})},
        read=_read_ukm,
    ),
    "statlog_vehicle": _Spec(
        uci_id=149,
        directory="statlog/vehicle",
        files=_VEHICLE_FILES,
        features=_VEHICLE_FEATURES,
        targets={"class": _Classes(("opel", "saab", "bus", "van"))},
        read=_text_reader(_Text(fields=19, label=18)),
    ),
    "hcv_egypt": _Spec(
        uci_id=503,
        directory="00503",
        files=("HCV-Egy-Data.zip",),
        features=_HCV_FEATURES,
        targets={_HCV_TARGET: _Classes(_codes(1, 4))},
        read=_read_hcv,
    ),
    "yeast": _Spec(
        uci_id=110,
        directory="yeast",
        files=("yeast.data",),
        features=_YEAST_FEATURES,
        targets={
            "site": _Classes(("CYT", "NUC", "MIT", "ME3", "ME2", "ME1", "EXC", "VAC", "POX", "ERL"))
        },
        read=_text_reader(_Text(fields=10, label=9, drop=(0,))),
    ),
    "cardiotocography": _Spec(
        uci_id=193,
        directory="00193",
        files=("CTG.xls",),
        features=_CTG_FEATURES,
        targets={"CLASS": _Classes(_codes(1, 10)), "NSP": _Classes(_codes(1, 3))},
        read=_read_ctg,
    ),
    "statlog_landsat": _Spec(
        uci_id=146,
        directory="statlog/satimage",
        files=("sat.trn", "sat.tst"),
        features=tuple(f"pixel{p}_band{b}" for p in range(1, 10) for b in range(1, 5)),
        targets={"class": _Classes(_codes(1, 7, skip=(6,)))},
        read=_text_reader(_Text(fields=37, label=36)),
    ),
    "wine_quality": _Spec(
        uci_id=186,
        directory="wine-quality",
        files=_WINE_FILES,
        features=_WINE_FEATURES,
        targets={"quality": _Classes(_codes(3, 9))},
        read=_text_reader(
            _Text(fields=12, label=11, sep=";", header=_WINE_FEATURES + ("quality",))
        ),
    ),
    "pendigits": _Spec(
        uci_id=81,
        directory="pendigits",
        files=("pendigits.tra", "pendigits.tes"),
        features=tuple(f"{axis}{i}" for i in range(1, 9) for axis in "xy"),
        targets={"digit": _Classes(_codes(0, 9))},
        read=_text_reader(_Text(fields=17, label=16, sep=",")),
    ),
    "letter_recognition": _Spec(
        uci_id=59,
        directory="letter-recognition",
        files=("letter-recognition.data",),
        features=_LETTER_FEATURES,
        targets={"lettr": _Classes(tuple(chr(c) for c in range(ord("A"), ord("Z") + 1)))},
        read=_text_reader(_Text(fields=17, label=0, sep=",")),
    ),
}

# sha256 of the files manifest.json calls verbatim copies of the UCI files; the others are
# None (re-encoded copies, or .xls files whose bytes differ between copies: module docstring).
_SHA256: dict[str, str] = {
    "ecoli.data": "008bd8fbb1d8b34040c3c8c4e987cac2a7ebf116e008b140cc6441be5261ba1d",
    "HCV-Egy-Data.zip": "8f4ed896e9413f91f150dac880cbbb421ef1a096561105eebe9b9c8c04935c30",
    "yeast.data": "7cf61776fc04f527f93bf57a327b863893a1225d82df02d457e8950173218258",
    "sat.trn": "e896dc88a960fa2404160fc4c3cb3dc53fcf4afd80ba920bf2d261bd42d12613",
    "winequality-red.csv": "4a402cf041b025d4566d954c3b9ba8635a3a8a01e039005d97d6a710278cf05e",
    "winequality-white.csv": "76c3f809815c17c07212622f776311faeb31e87610d52c26d87d6e361b169836",
    "pendigits.tra": "e2b9eb9f0d0467e2b64a4816a3420edf2b8043447576f4b84337aba44a9f97d3",
    "pendigits.tes": "8bd03229c5c5291fefe43e45465dd948d2645bf23328b9d993e0b777666b2015",
    "letter-recognition.data": "2b89f3602cf768d3c8355267d2f13f2417809e101fc2b5ceee10db19a60de6e2",
}

TARGETS: dict[str, tuple[str, ...]] = {name: tuple(spec.targets) for name, spec in _SPECS.items()}
"""The class columns each dataset can be read with; the first is the paper's (the default)."""


# --- public entry points ------------------------------------------------------------------


def _spec(name: str) -> _Spec:
    if name not in _SPECS:
        raise ConfigError(
            f"unknown tabular dataset {name!r}; choose one of: {', '.join(TABULAR_NAMES)}"
        )
    return _SPECS[name]


def _target(name: str, target: str | None) -> str:
    choices = TARGETS[name]
    if target is None:
        return choices[0]
    if target not in choices:
        raise ConfigError(f"{name}: unknown target {target!r}; choose one of: {', '.join(choices)}")
    return target


def file_sources(name: str) -> tuple[DataSource, ...]:
    """The official files of dataset ``name``, each a :class:`DataSource` in the order read.

    Each accepts only its UCI file name, in ``uci_tabular/<name>/``, and downloads from the
    UCI file server (``archive.ics.uci.edu/ml/machine-learning-databases/...``); its sha256 is
    the manifest's where that is the UCI file's, else ``None`` (module docstring).

    Raises
    ------
    ConfigError
        If ``name`` is not one of :data:`TABULAR_NAMES`.
    """
    spec = _spec(name)
    return tuple(
        DataSource(
            name=f"{name} {filename}",
            folder=f"{FOLDER}/{name}",
            candidates=(filename,),
            download=Download(
                url=_UCI_FILES + spec.directory + "/" + filename.replace(" ", "%20"),
                filename=filename,
                sha256=_SHA256.get(filename),
            ),
            homepage=spec.homepage,
        )
        for filename in spec.files
    )


def _missing(name: str, folder: Path, missing: Sequence[DataSource], more: str = "") -> DataError:
    """The error for files of ``name`` absent from ``folder``: names, folder, UCI URLs."""
    listed = "; ".join(f"{s.download.filename} ({s.download.url})" for s in missing)
    total = len(_SPECS[name].files)
    return DataError(
        f"{name}: {len(missing)} of its {total} file{'s' if total > 1 else ''} missing from "
        f"{folder}: {listed}; download {'it' if len(missing) == 1 else 'them'} into that folder"
        f"{more} (see {_SPECS[name].homepage})"
    )


def read_tabular(name: str, folder: str | os.PathLike, target: str | None = None) -> TabularDataset:
    """Read dataset ``name`` from ``folder``, which holds its official files.

    Parameters
    ----------
    name : one of :data:`TABULAR_NAMES`.
    folder : the folder with the files of :func:`file_sources` (nothing is downloaded).
    target : the class column (see :data:`TARGETS`); ``None`` is the paper's.

    Returns
    -------
    TabularDataset

    Raises
    ------
    ConfigError
        Unknown ``name`` or ``target``.
    DataError
        Missing files (named, with the folder and UCI URL) and every malformed content (see
        the module docstring).
    """
    spec = _spec(name)
    target = _target(name, target)
    folder = Path(folder)
    missing = [s for s in file_sources(name) if not (folder / s.download.filename).is_file()]
    if missing:
        raise _missing(name, folder, missing)
    x, y = spec.read(name, [folder / f for f in spec.files], target)
    return TabularDataset(
        name=name,
        x=x,
        y=y,
        class_names=spec.targets[target].names,
        feature_names=spec.features,
    )


def load_tabular(
    name: str,
    data_dir: str | os.PathLike | None = None,
    download: bool = True,
    target: str | None = None,
) -> TabularDataset:
    """Load dataset ``name`` from ``<data_dir>/uci_tabular/<name>/``, downloading if allowed.

    Parameters
    ----------
    name : one of :data:`TABULAR_NAMES`.
    data_dir : data directory (default ``$FEDPRUNE_DATA_DIR`` or ``./data``); it must exist
        (:func:`fedprune.data.sources.require_data_dir`), its ``uci_tabular/<name>/``
        sub-folders are created for downloads.
    download : fetch missing files from UCI (sha256-checked where known, see
        :func:`file_sources`).
    target : the class column (see :data:`TARGETS`); ``None`` is the paper's.

    Returns
    -------
    TabularDataset
        float32 features (n, d), int64 classes 0..k-1.

    Raises
    ------
    ConfigError
        Unknown ``name`` or ``target``.
    DataError
        A missing data directory; missing files that may not or could not be downloaded
        (naming the files, the folder and the UCI URLs); a file that changed since its
        download; and every malformed content (see the module docstring).
    """
    _spec(name)
    _target(name, target)
    root = sources.require_data_dir(data_dir)
    folder = root / FOLDER / name
    missing = []
    for source in file_sources(name):
        path = folder / source.download.filename
        if path.is_file():
            sources.check_recorded_sha256(path, source)
        else:
            missing.append(source)
    if missing and not download:
        raise _missing(name, folder, missing, f" or set --data-dir/${sources.ENV_DATA_DIR}")
    if missing:
        (root / FOLDER).mkdir(exist_ok=True)  # inside the existing data directory only
    for source in missing:
        sources.fetch(source, folder)
    return read_tabular(name, folder, target)
