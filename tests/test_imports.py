"""The import structure of ``fedprune`` and ``edge_export``: no module imports one above it.

Read from the source with :mod:`ast`, so nothing here imports TensorFlow. An import counts
wherever it is written: at module level, inside a function, absolute or relative, and
``from package import name`` counts as an import of ``package.name`` when that is a module.

Interpretations:

* A cycle is a cycle between modules through any import (module or function level, including
  ``if TYPE_CHECKING:`` blocks: they are a dependency even when they do not run).
  ``from package import name`` where ``name`` is not a module is an import of the package's
  ``__init__``, not of every submodule.
* Rules (b) and (c) look at a module's own imports (direct), at any level.
* The layers (:data:`LAYERS`) rank packages: each subpackage of ``fedprune``, each of its
  top-level modules, and ``edge_export``. A module may import its own layer and the layers
  below it, never one above, at any level (a function-level import is a dependency too: it
  only moves the failure to run time). The root ``fedprune/__init__.py`` is in no layer:
  importing any module runs it first, so every module may read it, and it may import a
  fedprune module only inside a function (its exit handler), never at module level.
* Rule (d) asks what *importing* a module loads, so it follows module-level imports only
  (not function bodies, not ``if TYPE_CHECKING:`` blocks), transitively through fedprune
  modules, and counts the ``__init__`` of every package on the way (importing ``a.b.c`` runs
  ``a/__init__.py`` and ``a/b/__init__.py``).
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("fedprune", "edge_export")
HEAVY = ("tensorflow", "tensorflow_federated", "tensorflow_model_optimization")
CONCRETE_BUILDERS = ("fedprune.models.cnn1d", "fedprune.models.autoencoder")
LIGHT_CLI = "fedprune.cli"

LAYERS = (
    # the foundations: errors, parameter rules, lazy names, log quieting, the interpreter
    "errors",
    "checks",
    "lazy",
    "quiet",
    "interpreter",
    "workers",  # where TFF computations run (processes, sandbox, TLS): knows no computation
    "runs",  # the files fedprune reads and writes: run directories, safe I/O, .npz reader
    "data",  # datasets: readers, caches, partitions, recipes
    "sparsity",  # schedules, scores, masks, the prunable-layer table
    "models",  # the model table, builders, specs
    "configs",  # the methods' configuration classes and strategy tables
    "edge_export",  # reads finished runs: needs neither the engine nor the algorithms
    "engine",  # TFF processes, rounds, the run composer
    "privacy",
    "methods",  # the method registry the command line and the API build from
    "algorithms",
    "api",
    "reproduce",
    "cli",
    "command_server",  # runs command lines through the CLI for reproductions
    "__main__",
)
"""Layers from lowest to highest: a module imports nothing of a higher layer."""


@dataclass(frozen=True)
class Import:
    """One import statement's target, resolved to a module name where it is one of ours."""

    target: str  # a module of the walked packages, or an external dotted name
    line: int
    module_level: bool  # runs when the importing module is imported


def module_files(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Every module of ``packages`` under ``root``: dotted name -> file (``__init__`` = package)."""
    modules = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.Module) -> Iterable[tuple[ast.Import | ast.ImportFrom, bool]]:
    """(import node, module level?) for every import in ``tree``."""

    def visit(node: ast.AST, module_level: bool) -> Iterable[tuple[ast.AST, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, module_level
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                yield from visit(child, False)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    yield from visit(ast.Module(body=[stmt], type_ignores=[]), False)
                for stmt in child.orelse:
                    yield from visit(ast.Module(body=[stmt], type_ignores=[]), module_level)
            else:
                yield from visit(child, module_level)

    yield from visit(tree, True)


def _longest_known(name: str, modules: Mapping[str, Path]) -> str:
    """``name`` cut to its longest prefix that is a known module, else ``name`` (external)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return name


def imports_of(module: str, path: Path, modules: Mapping[str, Path]) -> list[Import]:
    """Every import written in ``path`` (the file of ``module``), resolved against ``modules``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    found = []
    for node, module_level in _import_nodes(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            if node.module == "__future__":
                continue
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            targets = []
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                targets.append(submodule if submodule in modules else source)
        for target in dict.fromkeys(targets):
            found.append(Import(_longest_known(target, modules), node.lineno, module_level))
    return found


def import_graph(root: Path, packages: Iterable[str]) -> dict[str, list[Import]]:
    """Module -> its imports, for every module of ``packages`` under ``root``."""
    modules = module_files(root, packages)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def internal_edges(graph: Mapping[str, list[Import]]) -> dict[str, set[str]]:
    """Module -> the walked modules it imports (self-imports dropped)."""
    return {
        module: {i.target for i in imports if i.target in graph and i.target != module}
        for module, imports in graph.items()
    }


def import_cycles(graph: Mapping[str, list[Import]]) -> list[list[str]]:
    """One cycle ``[a, b, ..., a]`` for each group of modules that import each other.

    The groups are the strongly connected components of the import graph (Tarjan); within
    each, a breadth-first search from its smallest module back to itself gives a shortest
    cycle to report.
    """
    edges = internal_edges(graph)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def strongconnect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(edges[node]):
            if successor not in index:
                strongconnect(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            strongconnect(node)

    cycles = []
    for component in sorted(components):
        start, members = component[0], set(component)
        came_from: dict[str, str] = {}
        frontier = [start]
        while start not in came_from:
            next_frontier = []
            for node in frontier:
                for successor in sorted(edges[node] & members):
                    if successor not in came_from:
                        came_from[successor] = node
                        next_frontier.append(successor)
            frontier = next_frontier
        path = [start]
        while (previous := came_from[path[-1]]) != start:
            path.append(previous)
        cycles.append([start, *reversed(path)])
    return cycles


def forbidden_imports(
    graph: Mapping[str, list[Import]], importers: str, targets: Iterable[str]
) -> list[str]:
    """``module:line -> target`` for each direct import from a module in ``importers`` (a
    package prefix) of a module in or under one of ``targets``."""
    targets = tuple(targets)
    return [
        f"{module}:{i.line} -> {i.target}"
        for module, imports in sorted(graph.items())
        if _within(module, importers)
        for i in imports
        if any(_within(i.target, t) for t in targets)
    ]


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def layer_of(module: str, layers: Sequence[str]) -> str | None:
    """The layer of a walked module: ``edge_export`` or the ``fedprune`` subpackage or
    top-level module it is in; ``None`` for the root package ``fedprune`` itself."""
    parts = module.split(".")
    name = parts[0] if parts[0] != "fedprune" else (parts[1] if len(parts) > 1 else None)
    if name is not None and name not in layers:
        raise AssertionError(f"{module} is in no layer: add {name!r} to LAYERS")
    return name


def upward_imports(graph: Mapping[str, list[Import]], layers: Sequence[str]) -> list[str]:
    """``module:line -> target (low < high)`` for each import, at any level, of a walked
    module in a higher layer than the importer's (imports of and by the root package
    excepted, see :func:`layer_of`)."""
    rank = {layer: i for i, layer in enumerate(layers)}
    found = []
    for module, imports in sorted(graph.items()):
        low = layer_of(module, layers)
        for i in imports:
            if low is None or i.target not in graph:
                continue
            high = layer_of(i.target, layers)
            if high is not None and rank[high] > rank[low]:
                found.append(f"{module}:{i.line} -> {i.target} ({low} < {high})")
    return found


def loads_at_import(graph: Mapping[str, list[Import]], module: str) -> dict[str, list[str]]:
    """What importing ``module`` loads: each module reached -> one import chain to it.

    Follows module-level imports only, through walked modules, and the ``__init__`` of every
    package on the way. External modules are reached but not followed.
    """
    chains: dict[str, list[str]] = {}
    todo = [(module, [module])]
    while todo:
        name, chain = todo.pop()
        if name in chains:
            continue
        chains[name] = chain
        if name not in graph:
            continue
        parts = name.split(".")
        parents = [".".join(parts[:end]) for end in range(1, len(parts))]
        for parent in parents:
            if parent in graph:
                todo.append((parent, [*chain, parent]))
        for i in graph[name]:
            if i.module_level:
                todo.append((i.target, [*chain, i.target]))
    return chains


def heavy_imports(graph: Mapping[str, list[Import]], module: str) -> list[str]:
    """The import chains by which importing ``module`` loads TensorFlow, TFF or tfmot."""
    return [
        " -> ".join(chain)
        for name, chain in sorted(loads_at_import(graph, module).items())
        if any(_within(name, heavy) for heavy in HEAVY)
    ]


# --- the walker, on planted packages ---------------------------------------------------------


def write_package(root: Path, files: Mapping[str, str]) -> None:
    for relative, source in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))


def test_walker_resolves_every_kind_of_import(tmp_path):
    write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": """
                from __future__ import annotations
                import os.path
                import pkg.sub.c
                from pkg import b
                from . import d
                from .sub import c as c_again
                from pkg.b import helper

                def late():
                    from pkg.sub.c import thing
            """,
            "pkg/b.py": "def helper(): ...\n",
            "pkg/d.py": "",
            "pkg/sub/__init__.py": "from ..b import helper\n",
            "pkg/sub/c.py": "from .. import d\nthing = 1\n",
        },
    )
    graph = import_graph(tmp_path, ["pkg"])

    assert sorted(graph) == ["pkg", "pkg.a", "pkg.b", "pkg.d", "pkg.sub", "pkg.sub.c"]
    assert [(i.target, i.line, i.module_level) for i in graph["pkg.a"]] == [
        ("os.path", 3, True),
        ("pkg.sub.c", 4, True),
        ("pkg.b", 5, True),
        ("pkg.d", 6, True),
        ("pkg.sub.c", 7, True),
        ("pkg.b", 8, True),
        ("pkg.sub.c", 11, False),
    ]
    assert [i.target for i in graph["pkg.sub"]] == ["pkg.b"]
    assert [i.target for i in graph["pkg.sub.c"]] == ["pkg.d"]
    assert import_cycles(graph) == []


def test_walker_reports_a_planted_cycle_through_a_function_level_import(tmp_path):
    write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg import b\n",
            "pkg/b.py": "import pkg.c\n",
            "pkg/c.py": "def f():\n    from pkg.a import x\n",
            "pkg/d.py": "import pkg.a\n",
            "pkg/e.py": "from pkg import f\n",
            "pkg/f.py": "from . import e\n",
        },
    )

    assert import_cycles(import_graph(tmp_path, ["pkg"])) == [
        ["pkg.a", "pkg.b", "pkg.c", "pkg.a"],
        ["pkg.e", "pkg.f", "pkg.e"],
    ]


def test_walker_finds_forbidden_direct_imports(tmp_path):
    write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/low/__init__.py": "",
            "pkg/low/ok.py": "from pkg.high import api\n",
            "pkg/low/bad.py": "\n\ndef f():\n    from pkg.high.impl import g\n",
            "pkg/high/__init__.py": "",
            "pkg/high/api.py": "",
            "pkg/high/impl.py": "",
        },
    )
    graph = import_graph(tmp_path, ["pkg"])

    assert forbidden_imports(graph, "pkg.low", ["pkg.high.impl"]) == [
        "pkg.low.bad:4 -> pkg.high.impl"
    ]
    assert forbidden_imports(graph, "pkg.low", ["pkg.high"]) == [
        "pkg.low.bad:4 -> pkg.high.impl",
        "pkg.low.ok:1 -> pkg.high.api",
    ]


def test_walker_finds_upward_imports_between_layers(tmp_path):
    write_package(
        tmp_path,
        {
            "fedprune/__init__.py": "def at_exit():\n    from fedprune.high import h\n",
            "fedprune/low.py": "import fedprune\n",
            "fedprune/mid/__init__.py": "",
            "fedprune/mid/a.py": (
                "from fedprune import low\n\ndef f():\n    import fedprune.high.h\n"
            ),
            "fedprune/mid/b.py": "from fedprune.mid import a\nimport json\n",
            "fedprune/high/__init__.py": "",
            "fedprune/high/h.py": "from ..mid import b\nfrom fedprune import low\n",
        },
    )
    graph = import_graph(tmp_path, ["fedprune"])

    assert upward_imports(graph, ("low", "mid", "high")) == [
        "fedprune.mid.a:4 -> fedprune.high.h (mid < high)"
    ]
    assert upward_imports(graph, ("high", "mid", "low")) == [
        "fedprune.high.h:1 -> fedprune.mid.b (high < mid)",
        "fedprune.high.h:2 -> fedprune.low (high < low)",
        "fedprune.mid.a:1 -> fedprune.low (mid < low)",
    ]
    with pytest.raises(AssertionError, match="'mid' to LAYERS"):
        upward_imports(graph, ("low", "high"))


def test_walker_follows_module_level_imports_and_package_inits_only(tmp_path):
    write_package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/light.py": "import json\n\ndef f():\n    import tensorflow\n",
            "pkg/typed.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    import tensorflow_federated\n"
            ),
            "pkg/heavy/__init__.py": "import tensorflow_model_optimization as tfmot\n",
            "pkg/heavy/leaf.py": "",
            "pkg/via_parent.py": "from pkg.heavy import leaf\n",
            "pkg/via_chain.py": "import pkg.light\nfrom pkg import middle\n",
            "pkg/middle.py": "from tensorflow import keras\n",
        },
    )
    graph = import_graph(tmp_path, ["pkg"])

    assert heavy_imports(graph, "pkg.light") == []
    assert heavy_imports(graph, "pkg.typed") == []
    assert heavy_imports(graph, "pkg.via_parent") == [
        "pkg.via_parent -> pkg.heavy.leaf -> pkg.heavy -> tensorflow_model_optimization"
    ]
    assert heavy_imports(graph, "pkg.via_chain") == ["pkg.via_chain -> pkg.middle -> tensorflow"]


# --- the rules, on the repository ------------------------------------------------------------


@pytest.fixture(scope="module")
def graph() -> dict[str, list[Import]]:
    return import_graph(REPO, PACKAGES)


def test_the_walk_sees_the_packages(graph):
    # guards the rules below against passing on an empty or misread tree
    assert {"fedprune", "fedprune.engine.process", "edge_export.formats"} <= set(graph)
    assert "tensorflow" in {i.target for i in graph["fedprune.engine.process"]}


def test_no_import_cycle(graph):
    cycles = [" -> ".join(cycle) for cycle in import_cycles(graph)]
    assert cycles == [], "import cycles:\n" + "\n".join(cycles)


def test_no_layer_imports_a_higher_one(graph):
    found = upward_imports(graph, LAYERS)
    assert found == [], "imports of a higher layer (see LAYERS):\n" + "\n".join(found)


def test_every_layer_exists_and_the_root_package_imports_nothing_at_import(graph):
    # a layer that no longer exists would silently let its neighbours swap places
    present = {layer_of(m, LAYERS) for m in graph} - {None}
    assert present == set(LAYERS)
    # importing any module runs fedprune/__init__.py first: it must pull nothing in
    at_import = [i.target for i in graph["fedprune"] if i.module_level and i.target in graph]
    assert at_import == []


def test_configs_name_no_algorithm_module():
    """The configurations say what they are by their class; the algorithms register their
    strategies against it (``fedprune.configs.strategies``): no string names one."""
    found = [
        f"{path.relative_to(REPO)}:{node.lineno}: {node.value!r}"
        for path in sorted((REPO / "fedprune" / "configs").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and "fedprune.algorithms" in node.value
    ]
    assert found == [], "\n".join(found)


def test_edge_export_imports_no_algorithm(graph):
    found = forbidden_imports(graph, "edge_export", ["fedprune.algorithms"])
    assert found == [], "edge_export must read run directories, not algorithms:\n" + "\n".join(
        found
    )


def test_engine_imports_no_concrete_model_builder(graph):
    found = forbidden_imports(graph, "fedprune.engine", CONCRETE_BUILDERS)
    assert found == [], "the engine takes model specs, not builders:\n" + "\n".join(found)


def test_configs_method_registry_and_cli_load_no_tensorflow(graph):
    # `fedprune --help` must not load TensorFlow: the CLI, the method registry and the
    # configuration classes it builds its options from
    light = sorted(
        m for m in graph if _within(m, "fedprune.configs") or m in ("fedprune.methods", LIGHT_CLI)
    )
    assert LIGHT_CLI in light
    found = [chain for module in light for chain in heavy_imports(graph, module)]
    assert found == [], "importing these must not load TensorFlow:\n" + "\n".join(found)


def test_workers_know_no_computation(graph):
    """Where computations run is apart from what they compute: the worker, sandbox and TLS
    code imports nothing of the engine's computations, the models or the algorithms."""
    computations = ("fedprune.algorithms", "fedprune.models", "fedprune.sparsity")
    engine = [
        m for m in graph if _within(m, "fedprune.engine") and m != "fedprune.engine.interrupts"
    ]
    found = forbidden_imports(graph, "fedprune.workers", (*computations, *engine))
    assert found == [], "fedprune.workers imports computations:\n" + "\n".join(found)
    assert any(_within(m, "fedprune.workers") for m in graph)


def test_exporting_and_plotting_a_finished_run_load_no_tff(graph):
    """TFF takes about 10 s to import and only building a learning process needs it: the
    export and plotting of a finished run, and the model specs they rebuild models from,
    must not load it at import."""
    light = sorted(
        m
        for m in graph
        if _within(m, "edge_export") or m in ("fedprune.models.spec", "fedprune.runs.plot")
    )
    assert "edge_export.export" in light
    found = [
        " -> ".join(chain)
        for module in light
        for name, chain in sorted(loads_at_import(graph, module).items())
        if _within(name, "tensorflow_federated")
    ]
    assert found == [], "importing these must not load TFF:\n" + "\n".join(found)
