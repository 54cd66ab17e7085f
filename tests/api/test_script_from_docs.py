"""docs/api.md's first run, written only from that page (made-up numpy windows of four
clients with ids 7..10, a new three-layer Keras model, two rounds of CA-AFP), runs end to end
as a script of its own: it exits 0, prints no TensorFlow C++ log line, and the run it leaves
reads back with typed metrics, ``str`` summary keys, your client ids and its data stored
once (``dataset.json``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import fedprune as fp
from fedprune.quiet import NATIVE_LINE
from tests.test_api_docs import REPO, python_blocks

pytestmark = pytest.mark.slow
MARK = "--- the script's run starts ---"


def _first_run_block() -> str:
    (block,) = [b for b in python_blocks(REPO / "docs" / "api.md") if "def tiny_model" in b]
    return block


def _keys(value: object) -> set[type]:
    """The types of every key of every mapping in ``value``."""
    if isinstance(value, dict):
        return {type(k) for k in value} | {t for v in value.values() for t in _keys(v)}
    if isinstance(value, list):
        return {t for v in value for t in _keys(v)}
    return set()


def test_the_first_run_of_the_docs_runs_as_a_script(tmp_path):
    script = tmp_path / "first_run.py"
    # as many scripts begin: TensorFlow imported before fedprune, whose lines at that import
    # fedprune cannot reach; none may follow
    start = f"import sys\nimport tensorflow\nprint({MARK!r}, file=sys.stderr, flush=True)\n"
    script.write_text(start + _first_run_block())
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["FEDPRUNE_CACHE_DIR"] = str(tmp_path / "cache")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    during = done.stderr.split(MARK, 1)[1].splitlines()
    native = [line for line in during if NATIVE_LINE.match(line.encode())]
    assert not native, native[:5]
    assert "{" in done.stdout  # the script's own prints: accuracy, clusters, last row

    result = fp.open_result(tmp_path / "runs" / "api-first")
    assert sorted(result.assignments()) == [7, 8, 9, 10]
    assert sorted(result.models()) == [7, 8, 9, 10]
    assert _keys(result.summary) == {str} and _keys(result.config) <= {str}
    rows = result.metrics()
    assert rows and all(type(r["round"]) is int and type(r["cluster"]) is int for r in rows)
    assert all(isinstance(r["phase"], str) for r in rows)
    assert all(r["train_loss"] is None or type(r["train_loss"]) is float for r in rows)
    assert any(type(r["train_loss"]) is float for r in rows)
    record = json.loads((tmp_path / "runs" / "api-first" / "dataset.json").read_text())
    assert (
        record["linked"] is True and Path(record["store"]).parent == tmp_path / "cache" / "datasets"
    )
