"""What users read speaks about fedprune, not about how its making was organized (no
TensorFlow; the files in milliseconds, the CLI help in subprocesses, marked slow).

Checked, for the *process words* of ``PROCESS_WORD``: ``README.md``, ``DEVELOPERS.md``,
``docs/*.md``, the whole text of every ``.py`` file under ``fedprune/`` and of
``experiments/*.py``, and the output of ``python -m fedprune --help`` and of ``--help`` for
every sub-command and sub-sub-command (``train ascfl``, ``reproduce table2``, ...). A process
word names a unit of the work rather than the software: a work stop or an issue followed by
its number (also written with ``#`` or a hyphen, or as a range), "the issue" and "issue's",
a numbered reading of the work ("reading #" and a number), the word for a sitting of work,
singular or plural, and the old identifier prefix that ``ALGORITHM_1_LITERAL`` replaced. A
failure names each ``file:line`` (or the command) and the phrase.

Interpretations:

* The whole source text is scanned, not only docstrings and comments: simplest and strictest,
  and an identifier or an error message is text a user meets too.
* The sitting-of-work word has two allowed senses, both technical, singular and in one
  clause: TLS's (the handshake message of ``fedprune/workers/remote.py``) and TensorFlow's
  (docs/engine.md: TFF's worker runs the client graph through one). ``ALLOWED`` is removed
  from a line before the search.
* "stop" and "issue" without a number are ordinary words (an algorithm's stop, Phase 5's
  global stop, a command that stops with one line); the number makes a process word, and so
  do "last stop", "this stop" and the like. A numbered item of a list in the same text
  ("#6 (below)", "Readings 2b, 4 and 9") is not one: only "reading #" and a number is.
* Markdown is scanned whole, code blocks included: a command in a code block is read too.
* Sub-commands are found in each help's usage line (``{a,b,c} ...``, argparse's form for
  sub-parsers), level by level, so a new method or study is checked without listing it.
* This file's own examples are assembled from parts, so that the repository's text holds the
  process words only in the patterns above.
"""

from __future__ import annotations

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = [REPO / "README.md", REPO / "DEVELOPERS.md", *sorted((REPO / "docs").glob("*.md"))]
SOURCES = [*sorted((REPO / "fedprune").rglob("*.py")), *sorted((REPO / "experiments").glob("*.py"))]

PROCESS_WORD = re.compile(
    r"\bstops?[ -]\d+"
    r"|\b(?:last|this|next|previous|earlier|later) stop\b"
    r"|\bissues?[ -]#?\d+"
    r"|\bthe issue\b|\bissue's"
    r"|\breadings? #\d+"
    r"|\bsessions?\b"
    r"|BEFORE_STOP",
    re.IGNORECASE,
)
ALLOWED = re.compile(r"\bTLS session\b|\bTensorFlow\b[^.;]*?\bsession\b", re.IGNORECASE)
SUBCOMMANDS = re.compile(r"\{([\w,-]+)\}\s+\.\.\.")

# the examples' process words, assembled (see the module docstring)
STOP, ISSUE, SITTING, READING = "st" + "op", "iss" + "ue", "sess" + "ion", "read" + "ing"


def process_words(text: str) -> list[tuple[int, str]]:
    """(line number, phrase) of every process word in ``text``."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for match in PROCESS_WORD.finditer(ALLOWED.sub("", line)):
            found.append((number, match.group(0)))
    return found


def report(where: str, text: str) -> list[str]:
    """One ``where:line: 'phrase'`` entry per process word in ``text``."""
    return [f"{where}:{number}: {phrase!r}" for number, phrase in process_words(text)]


# -- the checker itself, on hand-written text -------------------------------------------------


def test_process_words_are_found_with_their_line():
    text = "\n".join(
        [
            f"Defaults (since {STOP} 31); measured in {STOP}s 35-36 and the {STOP}-25 runs.",
            f"Interpretation ({ISSUE} 16), {ISSUE} #17's target, {ISSUE.title()} 19's yardstick.",
            f"As the {ISSUE} asks; the {ISSUE}'s protocol; the admission rule ({READING} #5).",
            f"Resumed over three {SITTING}s; a {SITTING}'s end. BEFORE_{STOP.upper()}_31.",
            f"Measured last {STOP}. TensorFlow trained it over two {SITTING}s.",
        ]
    )
    assert process_words(text) == [
        (1, f"{STOP} 31"),
        (1, f"{STOP}s 35"),
        (1, f"{STOP}-25"),
        (2, f"{ISSUE} 16"),
        (2, f"{ISSUE} #17"),
        (2, f"{ISSUE.title()} 19"),
        (3, f"the {ISSUE}"),
        (3, f"the {ISSUE}"),
        (3, f"{READING} #5"),
        (4, f"{SITTING}s"),
        (4, SITTING),
        (4, f"BEFORE_{STOP.upper()}"),
        (5, f"last {STOP}"),
        (5, f"{SITTING}s"),
    ]


def test_ordinary_words_and_the_tls_sense_pass():
    text = "\n".join(
        [
            f"the client rejected the TLS {SITTING} (ALERT); does it trust our --tls-cert?",
            f"whose TensorFlow executes the client graph through a {SITTING}. On a CPU",
            f"The literal {STOP} of line 8 ends the run; Phase 5's global {STOP} (window = 3).",
            f"A second command {STOP}s with one line ({STOP}_window). Known {ISSUE}s below.",
            "retained_ratio of #6 (below); Readings 2b, 4 and 9 decide Table 3.",
            "ALGORITHM_1_LITERAL: the defaults that read Algorithm 1 literally.",
        ]
    )
    assert process_words(text) == []


def test_report_names_the_place_and_the_phrase():
    assert report("docs/x.md", f"fine\nsince {STOP} 31\n") == [f"docs/x.md:2: '{STOP} 31'"]


# -- the repository's text ---------------------------------------------------------------------


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_documents_have_no_process_words(path):
    assert report(str(path.relative_to(REPO)), path.read_text(encoding="utf-8")) == []


def test_sources_have_no_process_words():
    found = []
    for path in SOURCES:
        found += report(str(path.relative_to(REPO)), path.read_text(encoding="utf-8"))
    assert found == []


def _help(command: tuple[str, ...]) -> str:
    """``fedprune COMMAND --help``'s output, from a fresh interpreter."""
    proc = subprocess.run(
        [sys.executable, "-m", "fedprune", *command, "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 0, f"fedprune {' '.join(command)} --help: {proc.stderr}"
    return proc.stdout


@pytest.mark.slow
def test_cli_help_has_no_process_words():
    found, level, seen = [], [()], 0
    with ThreadPoolExecutor(max_workers=4) as pool:
        while level:
            children = []
            for command, text in zip(level, pool.map(_help, level)):
                found += report(" ".join(("fedprune", *command, "--help")), text)
                match = SUBCOMMANDS.search(text)
                if match:
                    children += [(*command, name) for name in match.group(1).split(",")]
            seen += len(level)
            level = children
    assert seen > 20  # fedprune, its commands, every train method and reproduce target
    assert found == []
