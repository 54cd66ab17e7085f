"""Behaviour comes from a method's configuration and its rule or policy, never from its name:
no module of ``fedprune/algorithms`` or ``fedprune/configs`` compares a method's name with a
string, or looks a table up by it (the registry, ``fedprune.methods``, is the one place that
maps names to configurations)."""

from __future__ import annotations

import ast
from pathlib import Path

import fedprune
from fedprune.methods import METHODS

ROOT = Path(fedprune.__file__).parent
SCANNED = sorted([*(ROOT / "algorithms").rglob("*.py"), *(ROOT / "configs").glob("*.py")])


def _names_method(node: ast.AST) -> bool:
    """Whether ``node`` reads a method's name (``config.method``, ``method``); an option's
    strategy (``client_method``, ``split_method``) is another thing."""
    if isinstance(node, ast.Attribute):
        return node.attr == "method"
    return isinstance(node, ast.Name) and node.id == "method"


def _strings(node: ast.AST) -> list[str]:
    """The string constants ``node`` is or holds (a tuple, list or set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [s for e in node.elts for s in _strings(e)]
    return []


def switches(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comparison of a method's name with strings, every comparison
    with a registered method's name, and every lookup keyed by a method's name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            literal = [s for side in sides for s in _strings(side)]
            if literal and (any(map(_names_method, sides)) or set(literal) & set(METHODS)):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Subscript) and _names_method(node.slice):
            registry = isinstance(node.value, ast.Name) and node.value.id == "METHODS"
            if not registry:  # the registry maps a name to its configuration: allowed
                found.append((node.lineno, ast.unparse(node)))
    return found


def test_the_scan_finds_the_switches_it_forbids():
    source = (
        "if config.method == 'ifca':\n    pass\n"
        "k = 2 if method in ('cfl', 'ascfl') else 1\n"
        "table = {'ifca': 1}[settings.method]\n"
        "ok = kind == 'kfed'\n"
        "fine = STEPS[self.client_method] if self.client_method == 'kmeans' else 0\n"
        "entry = METHODS[run.method]\n"
    )
    assert sorted(line for line, _ in switches(source)) == [1, 3, 4, 5]


def test_algorithms_and_configs_choose_no_behaviour_by_a_method_name():
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text}"
        for path in SCANNED
        for line, text in switches(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "\n".join(found)
