"""Every ``fedprune`` and ``edge-export`` command written in the README and in docs/*.md
parses against today's command line (no TensorFlow, milliseconds).

Checked: the commands in fenced code blocks (```bash, ```sh, ```console or unlabelled) and
in the prose's inline code spans, whose first word is ``fedprune`` or ``edge-export``; lines
continued with ``\\`` are joined, ``# comments`` and a leading ``$ `` dropped, and each part
of a ``&&`` chain, up to a ``|`` or ``>``, is given to the command's own argparse parser,
which must accept it.

Interpretations:

* A command with a placeholder the reader fills in (``...``, ``<...>``, ``NAME``-style words
  in capitals like ``RUN`` or ``PATH``, a lone ``S``, alternatives ``a|b``) is not a
  runnable command; it is skipped. An inline span without an option (``fedprune train``)
  names a command rather than giving one; it is skipped too.
* ``--help`` lines are accepted as they are (argparse exits 0 on them).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from edge_export.cli import build_parser as edge_export_parser
from fedprune.cli import build_parser as fedprune_parser

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^(```|~~~)\s*([a-z]*)\s*$")
INLINE = re.compile(r"`((?:fedprune|edge-export) [^`]+)`")
PLACEHOLDER = re.compile(r"\.\.\.|<[^>]*>|\b[A-Z]{3,}\b|\s[A-Z](?:\s|$)|\w\|\w")


def commands(text: str) -> list[tuple[int, str]]:
    """(line number, command) of every fedprune / edge-export command in ``text``'s code
    blocks."""
    found, fence, pending, start = [], None, "", 0
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line.strip())
        if match and fence is None:
            fence = match.group(2) or "bash"
            continue
        if match and fence is not None:
            fence, pending = None, ""
            continue
        if fence is None:
            found += [(number, span) for span in INLINE.findall(line) if "--" in span]
            continue
        if fence not in ("bash", "sh", "console", "shell"):
            continue
        stripped = line.strip().removeprefix("$ ")
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1].rstrip() + " "
            continue
        whole = re.sub(r"\s+#.*$", "", (pending + stripped).strip())
        pending = ""
        for part in whole.split("&&"):
            part = re.split(r"\s(?:\||>|2>)\s", part.strip())[0]
            if part.split(" ", 1)[0] in ("fedprune", "edge-export"):
                found.append((start, part))
    return found


CASES = [
    pytest.param(command, id=f"{page.name}:{line}")
    for page in PAGES
    for line, command in commands(page.read_text())
]


def test_the_pages_have_commands_to_check():
    assert len(CASES) > 20


@pytest.mark.parametrize("command", CASES)
def test_a_documented_command_parses(command):
    if PLACEHOLDER.search(command.replace("--", " ")):
        pytest.skip("has a placeholder to fill in")
    words = shlex.split(command)
    parser = fedprune_parser() if words[0] == "fedprune" else edge_export_parser()
    try:
        parser.parse_args(words[1:])
    except SystemExit as exit:
        assert exit.code == 0, f"{command!r} does not parse"


def test_the_reader_finds_continued_and_chained_commands():
    text = "```bash\n$ fedprune train fedavg --dataset uci_har \\\n    --out runs/a  # note\n"
    text += "make test && fedprune plot runs/a\n```\nfedprune train not-code\n"
    assert commands(text) == [
        (2, "fedprune train fedavg --dataset uci_har --out runs/a"),
        (4, "fedprune plot runs/a"),
    ]
