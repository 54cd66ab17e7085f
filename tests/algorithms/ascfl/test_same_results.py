"""Same seed, same results: tiny runs of AS-CFL (several readings, the warm-up, late
clients) and of each baseline on fixture images, compared round by round with the metrics
and summaries pinned in ``pinned_runs.json``.

The pins must only change with a deliberate change of an algorithm (then regenerate them
with ``python -m tests.algorithms.ascfl.test_same_results --write`` and say why in the
commit). Wall times are not compared; every other number is, to 1e-6 (the runs round to 6
decimals). Runs with noise are not pinned: TFF's DP noise is not reproducible from the seed
(:mod:`fedprune.algorithms.ascfl.dp_aggregator`).

Re-made 2026-11-28: local training became one in-graph loop over each client's tensors
(shuffle per epoch from ``(shuffle seed, epoch)``, dropout from the step's seed), new random
streams with the same protocol.
"""

from __future__ import annotations

import csv
import json
import sys
import tempfile
from pathlib import Path

import pytest

from fedprune.configs.ascfl import (
    ALGORITHM_1_LITERAL,
    CFLConfig,
    CFLFixedConfig,
    ClusteredImageConfig,
    IFCAConfig,
)
from fedprune.data import images
from tests.algorithms.test_fedcref_run import pattern_images
from tests.data.test_images import write_idx_pair

PINS = Path(__file__).with_name("pinned_runs.json")
TINY = dict(num_clients=4, proxy_size=20, rounds=2, batch_size=16, min_frac=0.5, max_frac=1.0)
TINY["warmup_rounds"] = 0
SIX = dict(TINY, num_clients=6, min_frac=0.3, max_frac=0.8, rounds=4)
RUNS = {
    "ascfl": ClusteredImageConfig(**TINY),
    "ascfl-algorithm1-literal": ClusteredImageConfig(**{**TINY, **ALGORITHM_1_LITERAL}),
    "ascfl-warmup": ClusteredImageConfig(**{**TINY, "rounds": 3, "warmup_rounds": 2}),
    "ascfl-late-warmup": ClusteredImageConfig(
        **{**SIX, "rounds": 5, "warmup_rounds": 1, "client_dropout": 0.2}
    ),
    "ascfl-other-readings": ClusteredImageConfig(
        **{
            **SIX,
            "without": "low-rank",
            "epochs_rule": "uniform",
            "stage1": "every_round",
            "update_reference": "start",
            "singletons": "merge",
            "split_guard": "halves",
            "low_rank_layers": "output",
        }
    ),
    "cfl-splits": CFLConfig(**{**SIX, "eps1": 5.0, "eps2": 0.01}),
    "cfl-fixed-dropout": CFLFixedConfig(**{**SIX, "clusters": 3, "client_dropout": 0.2}),
    "ifca": IFCAConfig(**TINY, clusters=2),
    "fedavg": IFCAConfig(**SIX, clusters=1),
}
TIMING = "wall_s"
# not numbers of the algorithm: the deploy manifest (tests/edge_export/test_clustered_export.py)
NOT_PINNED = {TIMING, "deploy"}


def _write_images(root: Path) -> Path:
    """The fixture images of ``test_run.py`` (the official idx format) under ``root``."""
    for split, seed in (("train", 0), ("test", 1)):
        x, y = pattern_images(per_class=30, classes=6, seed=seed)
        write_idx_pair(root / "mnist", images.file_names("mnist", split), x, y)
    return root


def _run(name: str, root: Path, image_dir: Path) -> dict:
    from fedprune.algorithms.ascfl.experiment import run_clustered_images

    out = root / name
    summary = run_clustered_images(RUNS[name], out, image_dir, progress=False)
    with open(out / "metrics.csv") as f:
        rows = [{k: v for k, v in r.items() if k != TIMING} for r in csv.DictReader(f)]
    return {"metrics": rows, "summary": {k: v for k, v in summary.items() if k not in NOT_PINNED}}


def _close(value: object, pinned: object) -> bool:
    if isinstance(pinned, dict):
        return set(value) == set(pinned) and all(_close(value[k], pinned[k]) for k in pinned)
    if isinstance(pinned, list):
        return len(value) == len(pinned) and all(map(_close, value, pinned))
    try:
        return float(value) == pytest.approx(float(pinned), abs=1e-6)
    except (TypeError, ValueError):
        return value == pinned


@pytest.fixture(scope="module")
def pattern_dir(tmp_path_factory):
    return _write_images(tmp_path_factory.mktemp("images"))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(RUNS))
def test_a_tiny_run_gives_the_pinned_numbers(name, pattern_dir, tmp_path, tff_context):
    pinned = json.loads(PINS.read_text())[name]
    got = _run(name, tmp_path, pattern_dir)
    assert _close(got["summary"], pinned["summary"]), (got["summary"], pinned["summary"])
    for row, pinned_row in zip(got["metrics"], pinned["metrics"], strict=True):
        assert _close(row, pinned_row), (row, pinned_row)
    # the TensorBoard files hold the rows: K, stability, traffic, accuracy, once per round
    from fedprune.runs.events import read_tags

    tags = read_tags(tmp_path / name)
    assert {"acc", "clusters", "stability", "uplink_mb", "downlink_mb"} <= set(tags)
    assert tags["acc"] == list(range(1, len(got["metrics"]) + 1))


def main(argv: list[str]) -> int:
    """``--write``: run every pinned run and write ``pinned_runs.json``."""
    if argv != ["--write"]:
        print(__doc__)
        return 2
    from fedprune.workers import execution

    execution.install()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            image_dir = _write_images(Path(tmp) / "images")
            pins = {name: _run(name, Path(tmp) / "runs", image_dir) for name in RUNS}
    finally:
        execution.shutdown()
    PINS.write_text(json.dumps(pins, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
