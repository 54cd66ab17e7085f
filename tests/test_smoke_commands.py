"""Every method page opens with a smoke command, and that command runs (fixture data, 2-30 s
a page).

Checked: each method page (``docs/*.md`` with a ``## Paper`` heading; each must have a
fixture here) has exactly one ``bash`` code block right after a ``<!-- smoke -->`` line,
above its ``## Paper`` heading and followed there by a ``Measured:`` line, holding one
``fedprune train`` command that writes to ``runs/smoke-<page name>``; and that command,
given to :func:`fedprune.cli.main` as it is written plus ``--data-dir`` (a fixture data
folder in the official file formats) and ``--no-progress``, with its ``--out`` moved to a
temporary folder, returns 0 and leaves ``summary.json``, ``metrics.csv`` and a non-empty
``tensorboard/`` folder in the run directory.

Interpretations:

* The command is the page's, word for word (continued lines joined, a ``# comment``
  dropped): no option is changed for the test. The fixture data are what make it small:
  the UCI-HAR zip of 6 subjects of :func:`tests.conftest.har_arrays`, MNIST-format idx
  files of the 6 band patterns of :func:`tests.algorithms.test_fedcref_run.pattern_images`,
  and an ``ecoli.data`` of :func:`tests.test_api_docs.ecoli_like` with 336 rows (the
  authors' client splits, the default partition, index rows up to 334 of the real table).
* Each fixture is sized for its page's options: AS-CFL's proxy set (``--proxy-size``) and
  the clients' test sets come out of the test split, and FedCRef draws
  ``--samples-per-class`` images per class and client with no overlap (600 per class serve
  all 6 clients at 100 each, so every draw of their classes fits). FedCRef's work is set by
  its options, not by the dataset's size, so its fixture run costs about what the real one
  does.
* Whether the command takes about a minute on the real data is not checked here (that needs
  the real data and a quiet machine): the page's ``Measured:`` line says what it took.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from fedprune.cli import main
from fedprune.data import images
from tests.algorithms.test_fedcref_run import pattern_images
from tests.conftest import har_arrays, write_uci_har
from tests.data.test_images import write_idx_pair
from tests.test_api_docs import ecoli_like

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
MARKER = "<!-- smoke -->"
PAPER = re.compile(r"^## Paper\s*$", re.M)
RUN_FILES = ("summary.json", "metrics.csv", "tensorboard")


def uci_har(root: Path) -> None:
    """UCI-HAR's zip with 6 subjects (6 windows per class each), as ``fixture_data_dir``."""
    (root / "uci_har").mkdir(parents=True)
    write_uci_har(root / "uci_har", *har_arrays(6, subjects=tuple(range(1, 7))), as_zip=True)


def mnist(per_class: int) -> Callable[[Path], None]:
    """MNIST's four idx files (train and test), ``per_class`` patterns of each of 6 classes."""

    def write(root: Path) -> None:
        for split, seed in (("train", 0), ("test", 1)):
            x, y = pattern_images(per_class=per_class, seed=seed)
            write_idx_pair(root / "mnist", images.file_names("mnist", split), x, y)

    return write


def ecoli(root: Path) -> None:
    """An ``ecoli.data`` of 336 rows (3 classes of 112), as many as the real table."""
    ecoli_like(root / "uci_tabular" / "ecoli" / "ecoli.data", per_class=112)


# page -> the fixture data its smoke command runs on
FIXTURES: dict[str, Callable[[Path], None]] = {
    "ascfl.md": mnist(per_class=100),
    "caafp.md": uci_har,
    "fedcref.md": mnist(per_class=600),
    "fedhire.md": ecoli,
}


def method_pages() -> list[str]:
    """The docs pages of a method: those with a ``## Paper`` heading."""
    return sorted(p.name for p in (REPO / "docs").glob("*.md") if PAPER.search(p.read_text()))


def smoke_blocks(text: str) -> list[tuple[int, str]]:
    """(line number of the marker, the block's text) of every ``<!-- smoke -->`` block."""
    lines = text.splitlines()
    blocks = []
    for number, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        assert (
            number + 1 < len(lines) and lines[number + 1].strip() == "```bash"
        ), f"line {number + 1}: {MARKER} must be followed by a ```bash fence"
        end = next(i for i in range(number + 2, len(lines)) if lines[i].strip() == "```")
        blocks.append((number, "\n".join(lines[number + 2 : end])))
    return blocks


def smoke_command(page: str) -> list[str]:
    """The words of the page's smoke command (continued lines joined, a comment dropped)."""
    text = (REPO / "docs" / page).read_text()
    blocks = smoke_blocks(text)
    assert len(blocks) == 1, f"{page} has {len(blocks)} {MARKER} blocks, not one"
    (marker_line, block), paper = blocks[0], PAPER.search(text)
    assert paper and marker_line < text[: paper.start()].count("\n"), "below ## Paper"
    section = "\n".join(text[: paper.start()].splitlines()[marker_line:])
    assert re.search(r"^Measured: ", section, re.M), f"{page}: no Measured: line"
    joined = re.sub(r"\\\n\s*", " ", block).strip()
    assert "\n" not in joined, f"{page}: the smoke block holds more than one command"
    words = shlex.split(joined, comments=True)
    assert words[:2] == ["fedprune", "train"], words
    assert words[words.index("--out") + 1] == f"runs/smoke-{Path(page).stem}", words
    return words


# -- the reader, on hand-written text -----------------------------------------------------------


def test_the_reader_takes_the_marked_block_only():
    text = "\n".join(
        [
            "# A method",
            "```bash",
            "fedprune train other --out runs/x",
            "```",
            "<!-- smoke -->",
            "```bash",
            "fedprune train m --dataset d \\",
            "    --out runs/smoke-m  # a note",
            "```",
        ]
    )
    assert smoke_blocks(text) == [
        (4, "fedprune train m --dataset d \\\n    --out runs/smoke-m  # a note")
    ]
    assert smoke_blocks("# A method\n```bash\nfedprune train m\n```\n") == []


def test_every_method_page_has_a_fixture():
    assert method_pages() == sorted(FIXTURES)


# -- the pages' commands ----------------------------------------------------------------------


@pytest.mark.parametrize("page", sorted(FIXTURES))
def test_the_smoke_command_runs_on_fixture_data(page, tmp_path):
    words = smoke_command(page)
    data = tmp_path / "data"
    FIXTURES[page](data)
    out = tmp_path / "run"
    words[words.index("--out") + 1] = str(out)
    args = [*words[1:], "--data-dir", str(data), "--no-progress"]
    assert main(args) == 0, f"fedprune {shlex.join(args)} failed"
    missing = [name for name in RUN_FILES if not (out / name).exists()]
    assert not missing, f"{page}: the run left no {', '.join(missing)}"
    assert (out / "tensorboard").is_dir() and any((out / "tensorboard").iterdir())
