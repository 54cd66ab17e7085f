"""Fixtures of the edge-export tests: the TFLite Micro source tree, one TFLM object cache, and
the trained FedAvg run exported in every format, each made once per test run and shared by its
test processes."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

TFLM_TREE = Path(__file__).resolve().parents[2].parent / "shared" / "tflm" / "tree"


@pytest.fixture(scope="session")
def tflm_tree() -> Path:
    """``../shared/tflm/tree``; skips, saying what is missing, without it or a compiler."""
    if not TFLM_TREE.is_dir():
        pytest.skip(f"TFLite Micro source tree not found at {TFLM_TREE} (../shared/tflm/tree)")
    missing = [tool for tool in ("g++", "make", "ar") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"no {', '.join(missing)} on this machine: needed to build TFLite Micro")
    return TFLM_TREE


@pytest.fixture(scope="session")
def tflm_cache(tmp_path_factory, worker_id: str) -> Path:
    """One TFLM object cache for every build of the test run, shared by its test processes
    (pytest-xdist; the builds lock it): the TFLM objects are compiled once. ``$TFLM_TEST_CACHE``
    names a folder kept between test runs instead (CI: the Cortex-M builds' TFLM and CMSIS-NN
    objects; entries are keyed by the trees' files, compiler and flags, so none goes stale)."""
    kept = os.environ.get("TFLM_TEST_CACHE")
    if kept:
        Path(kept).mkdir(parents=True, exist_ok=True)
        return Path(kept)
    if worker_id == "master":
        return tmp_path_factory.mktemp("tflm-cache")
    shared = tmp_path_factory.getbasetemp().parent / "tflm-cache"
    shared.mkdir(exist_ok=True)
    return shared


def built_once(tmp_path_factory, worker_id: str, name: str, build: Callable[[Path], None]) -> Path:
    """``build(folder)`` once per test run, shared by its test processes (pytest-xdist runs
    each test file in one of them): the first to ask builds under a lock, the others wait for
    it and read the result. A build that fails is not marked done, so the next one tries again
    (and fails the same way, in its own test)."""
    base = tmp_path_factory.getbasetemp()
    root = base if worker_id == "master" else base.parent
    folder, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


# the client exported in every format, and its command line's options beyond them
EXPORTED_CLIENT = 2


@pytest.fixture(scope="session")
def every_format_export(tmp_path_factory, worker_id: str) -> tuple[Path, Path, Path, list[dict]]:
    """A finished FedAvg run (``test_export._fedavg_run``: trained Keras weights, 70 % of
    every kernel zeroed) and its client 2 exported in every format: (run directory, data
    directory, export folder, ``export_report.json``). The tests only read them."""
    from edge_export.cli import main
    from edge_export.formats import FORMATS
    from tests.edge_export.test_export import _fedavg_run

    def build(folder: Path) -> None:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("FEDPRUNE_CACHE_DIR", str(folder / "cache"))
            run_dir, data_dir, _, _ = _fedavg_run(folder / "fedavg")
            args = [str(run_dir), "--clients", str(EXPORTED_CLIENT), "--formats", ",".join(FORMATS)]
            args += ["--qat-epochs", "1", "--out", str(folder / "export"), "--data-dir"]
            assert main([*args, str(data_dir), "--no-progress"]) == 0

    folder = built_once(tmp_path_factory, worker_id, "every-format-export", build)
    out = folder / "export"
    report = json.loads((out / "export_report.json").read_text())
    return folder / "fedavg" / "run", folder / "fedavg" / "data", out, report
