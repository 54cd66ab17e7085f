"""Fixtures of the TFLite Micro host builds: the source tree and one object cache."""

from __future__ import annotations

import os
import shutil
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
