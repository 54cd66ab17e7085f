"""Every example in a docstring of ``fedprune`` and ``edge_export`` runs, and no docstring
points at a file outside the repository.

The modules with examples are found by reading their source for ``>>>``, so only those are
imported (most of the package imports TensorFlow). Each runs under :func:`doctest.testmod`
with ``NORMALIZE_WHITESPACE`` (examples wrap long outputs), and must run at least one
example: a ``>>>`` that doctest does not see (inside a string that is not a docstring, say)
fails here rather than passing unseen.

Papers are cited by title, section and equation, not by where a copy lies on a development
machine (``shared/papers/...``): a user's checkout has no such folder. A module whose own code
looks in a ``shared`` folder beside the checkout may name it (it documents a default the code
reads, not a source).
"""

from __future__ import annotations

import ast
import doctest
import importlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("fedprune", "edge_export")
OUTSIDE = re.compile(r"(?<![\w.])(?:\.\./)?shared/")


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources() -> list[Path]:
    return [path for package in PACKAGES for path in sorted((REPO / package).rglob("*.py"))]


def modules_with_examples() -> list[str]:
    return [_module_name(path) for path in _sources() if ">>>" in path.read_text()]


def test_the_search_finds_the_examples():
    # guards the parametrized test below against running over nothing
    found = modules_with_examples()
    assert "fedprune.algorithms.fedcref.local_k" in found
    assert "fedprune.algorithms.ascfl.auto_clusters" in found


@pytest.mark.parametrize("name", modules_with_examples())
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE, report=True)
    assert result.attempted > 0, f"{name} holds '>>>' but doctest runs no example of it"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples of {name} failed"


def docstrings(tree: ast.Module) -> list[tuple[int, str]]:
    """(first line, text) of the module's, and each class's and function's, docstring."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            text = ast.get_docstring(node, clean=False)
            if text is not None:
                found.append((node.body[0].lineno, text))
    return found


def reads_a_shared_folder(tree: ast.Module) -> bool:
    """Whether the module's code builds a path with a ``shared`` component."""
    return any(isinstance(node, ast.Constant) and node.value == "shared" for node in ast.walk(tree))


def outside_references(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    if reads_a_shared_folder(tree):
        return []
    return [
        f"{path.relative_to(REPO)}:{start + offset}: {line.strip()}"
        for start, text in docstrings(tree)
        for offset, line in enumerate(text.splitlines())
        if OUTSIDE.search(line)
    ]


def test_the_reference_search_finds_a_planted_one(tmp_path):
    planted = tmp_path / "m.py"
    planted.write_text('"""See ``../shared/papers/X.txt``, Eq. 3."""\n\ndef f():\n    """ok"""\n')
    tree = ast.parse(planted.read_text())
    assert [start for start, _ in docstrings(tree)] == [1, 4]
    assert [line for _, text in docstrings(tree) for line in text.splitlines()
            if OUTSIDE.search(line)] == ["See ``../shared/papers/X.txt``, Eq. 3."]  # fmt: skip
    assert not OUTSIDE.search("fedprune.reproduce.shared_process, not_shared/x")


def test_no_docstring_names_a_file_outside_the_repository():
    found = [line for path in _sources() for line in outside_references(path)]
    assert found == [], "cite the paper (title, section, equation) instead:\n" + "\n".join(found)
