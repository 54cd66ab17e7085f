"""The documentation's links resolve and the README stays short (no TensorFlow, milliseconds).

Checked: every relative Markdown link in ``README.md``, ``DEVELOPERS.md`` and ``docs/*.md``
(inline ``[text](target)``, images, and reference definitions ``[label]: target``) names an
existing file, and a ``#anchor`` on a Markdown target names one of its headings.

Interpretations:

* Links inside fenced code blocks and inline code spans are text, not links, and are skipped;
  so are absolute URLs (``scheme:``) and site-absolute paths.
* Anchors follow GitHub's heading ids: lower-cased, every character that is not a letter,
  digit, ``_``, ``-`` or space dropped, spaces turned into ``-``; a repeated heading gets
  ``-1``, ``-2``, ... Headings inside code fences do not count.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
CHECKED = [REPO / "README.md", REPO / "DEVELOPERS.md", *sorted(DOCS.glob("*.md"))]

README_MAX_LINES = 250  # the limit; aim well under it
FIRST_SCREEN_LINES = 45

INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REFERENCE_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def prose_lines(text: str) -> list[str]:
    """The lines of ``text`` outside fenced code blocks (``` or ~~~), code spans blanked."""
    lines, fence = [], None
    for line in text.splitlines():
        marker = line.lstrip()[:3]
        if fence is None and marker in ("```", "~~~"):
            fence = marker
            continue
        if fence is not None:
            if marker == fence:
                fence = None
            continue
        lines.append(CODE_SPAN.sub("", line))
    return lines


def link_targets(text: str) -> list[str]:
    """Every link target written in ``text``'s prose, in order."""
    targets = []
    for line in prose_lines(text):
        targets += INLINE_LINK.findall(line)
        targets += REFERENCE_DEFINITION.findall(line)
    return targets


def slug(heading: str) -> str:
    """GitHub's id of a heading's text (before de-duplication)."""
    text = heading.replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The ids of ``text``'s headings, repeated headings numbered as GitHub does."""
    seen: dict[str, int] = {}
    ids = set()
    fence = None
    for line in text.splitlines():
        marker = line.lstrip()[:3]
        if fence is None and marker in ("```", "~~~"):
            fence = marker
            continue
        if fence is not None:
            fence = None if marker == fence else fence
            continue
        match = HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            ids.add(base if count == 0 else f"{base}-{count}")
    return ids


def broken_links(path: Path) -> list[str]:
    """The relative links of the Markdown file ``path`` that do not resolve, with the reason."""
    broken = []
    for target in link_targets(path.read_text(encoding="utf-8")):
        if SCHEME.match(target) or target.startswith("/"):
            continue
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / file_part).resolve() if file_part else path
        if not destination.exists():
            broken.append(f"{target}: no such file {destination}")
        elif anchor and destination.suffix == ".md":
            if anchor not in anchors(destination.read_text(encoding="utf-8")):
                broken.append(f"{target}: no heading #{anchor} in {destination.name}")
    return broken


# -- the checker itself, on hand-written text -------------------------------------------------


def test_link_targets_skip_code_and_keep_images_and_references():
    text = "\n".join(
        [
            "See [a](docs/a.md) and ![plot](img/p.png 'title'), not `[b](no.md)`.",
            "```bash",
            "echo [c](fenced.md)",
            "```",
            "[d](https://example.org/x) [e](#local) [`f`](g.md#h)",
            "[ref]: other/file.md",
        ]
    )
    assert link_targets(text) == [
        "docs/a.md",
        "img/p.png",
        "https://example.org/x",
        "#local",
        "g.md#h",
        "other/file.md",
    ]


def test_slug_follows_github_heading_ids():
    assert (
        slug("Measured: Table 2, 5 seeds (`make reproduce-table2`)")
        == "measured-table-2-5-seeds-make-reproduce-table2"
    )
    assert slug("Runs: resume, bad input, interrupts") == "runs-resume-bad-input-interrupts"
    text = "# Notes\n## Notes\n```\n# not a heading\n```\n### Notes\n"
    assert anchors(text) == {"notes", "notes-1", "notes-2"}


def test_broken_links_reports_missing_files_and_anchors(tmp_path):
    (tmp_path / "there.md").write_text("# Present\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md#present) [gone](missing.md) [bad anchor](there.md#absent) [self](#top)\n"
        "# Top\n"
    )
    assert broken_links(page) == [
        f"missing.md: no such file {tmp_path / 'missing.md'}",
        "there.md#absent: no heading #absent in there.md",
    ]


# -- the repository's documents ----------------------------------------------------------------


@pytest.mark.parametrize("path", CHECKED, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(path):
    assert broken_links(path) == []


def test_readme_is_short_with_the_essentials_on_its_first_screen():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) < README_MAX_LINES
    first_screen = "\n".join(lines[:FIRST_SCREEN_LINES])
    for needed in (
        "make test",  # the two set-up commands
        "make reproduce-table2",
        "--data-dir",  # where the data goes
        "$FEDPRUNE_DATA_DIR",
        "fedprune train",  # the quickstart
        "edge-export",
        "docs/README.md",  # the map of the docs
    ):
        assert needed in first_screen, needed


def test_docs_map_lists_every_page():
    listed = set(link_targets((DOCS / "README.md").read_text(encoding="utf-8")))
    pages = {p.name for p in DOCS.glob("*.md")} - {"README.md"}
    assert pages - listed == set()
