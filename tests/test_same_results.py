"""Same seed, same results across refactorings: tiny runs of FedAvg, CA-AFP (per weight and
``--block 16``), ClusterFL and FedCRef through the command line, compared with the summaries
pinned in ``tests/pinned_summaries.json``.

Which digits hold on every CPU: accuracies here are fractions of a few fixture windows per
client (one flipped window moves one by 1/12 or more), and counts (bytes, clusters, rounds,
the total sparsity a budget sets) do not depend on float rounding; they are compared to 1e-6
and held on the three settings measured (Intel Xeon AVX-512 with oneDNN off and on, AMD EPYC
Zen 4 with oneDNN off). How a global budget splits the pruned weights between layers follows
the trained scores' order, which the last digits can change by a weight or two: with oneDNN
on, CA-AFP's conv1 kept one more weight (layer sparsity 0.60556 -> 0.60521, conv2 0.72197 ->
0.72202, the total unchanged). ``TOLERANCE`` gives those keys 0.005 (about 14 of conv1's
2,880 weights), still far below what a real change of the pruning moves.

The pins must only change with a deliberate change of what is computed; then regenerate them
with ``python -m tests.test_same_results --write`` and say why here and in the commit. Wall
times are not compared; every other number is, to 1e-6 (accuracies of these runs are
fractions of a few windows, so a real change moves them by far more).

Why the pins changed (newest first):

* 2026-11-28: local training became one in-graph loop over each client's tensors, with the
  shuffle drawn per epoch from ``(shuffle seed, epoch)`` and dropout from the step's seed
  (``fedprune/engine/local_loop.py``, ``step_noise.py``): new random streams, the same
  protocol. Every pinned number moved; nothing else did (same keys, same sparsity and
  communication).
* Before: the pins were written by the code before the rounds moved to one shared round loop,
  and survived it unchanged.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
from pathlib import Path

import pytest

PINS = Path(__file__).with_name("pinned_summaries.json")
TIMING = {"wall_s", "seconds", "round_s"}
# keys the refactoring added on purpose (the pins predate them): the deploy manifest, Eq. 13
# in the paper's MiB beside our MB, the payload by kind that ClusterFL did not report, and
# the layers kept dense (none in these models)
ADDED = {
    "deploy",
    "comm_mib_eq13",
    "comm_mib_eq13_by_kind",
    "comm_mb_payload_by_kind",
    "dense_layers",
}

# keys whose numbers follow the trained scores' order (see the docstring): absolute tolerance
TOLERANCE = {"layer_sparsity": 0.005}

# the split the pins were made with (random; the time-ordered split is today's default)
COMMON = ["--clients-per-round", "4", "--local-epochs", "1", "--no-progress", "--split", "random"]
PIPELINE = ["--clusters", "2", "--ft-epochs", "1,2", "--start-sparsity", "0.5"]
PIPELINE += ["--target-sparsity", "0.7", "--prune-frequency", "2"]
RUNS = {
    "fedavg": ["train", "fedavg", "--dataset", "uci_har", "--rounds", "2", *COMMON],
    "caafp": ["train", "caafp", "--dataset", "uci_har", "--phases", "1,1,4", *PIPELINE, *COMMON],
    "caafp_block16": [
        "train", "caafp", "--dataset", "uci_har", "--phases", "0,1,4", "--block", "16",
        "--budget", "layerwise", "--prune-layers", "conv2,dense", *PIPELINE, *COMMON,
    ],
    "clusterfl": [
        "train", "clusterfl", "--dataset", "uci_har", "--rounds", "2", "--clusters", "2",
        "--ft-epochs", "1", *COMMON,
    ],
    "fedcref": [
        "train", "fedcref", "--dataset", "mnist", "--clients", "4", "--samples-per-class", "10",
        "--dirtiness", "0.2", "--epochs", "3", "--fl-rounds", "2", "--max-iterations", "2",
        "--batch-size", "8", "--theta", "0.3", "--no-progress",
    ],
}  # fmt: skip


# TensorBoard tags each pinned run must write (fedprune.runs.events), at least
TAGS = {
    "fedavg": {"train_loss", "train_accuracy", "comm_mb_eq13", "test_acc"},
    "caafp": {
        "train_loss", "cluster_0/train_accuracy", "cluster_1/sparsity", "comm_mb_payload",
        "clusters", "finetune/avg_acc", "finetune/personal_accuracy", "cluster_0/test_acc",
    },
    "caafp_block16": {"cluster_0/sparsity", "clusters", "finetune/personal_accuracy"},
    "clusterfl": {"train_loss", "primal_residual", "comm_mb_eq13"},
    "fedcref": {"acc", "communities", "clusters", "associations", "wrong_assoc_pct"},
}  # fmt: skip


def _without_timing(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_timing(v) for k, v in value.items() if k not in TIMING}
    return value


def _differences(pinned: object, got: object, where: str = "") -> list[str]:
    if isinstance(pinned, dict) and isinstance(got, dict):
        out = [f"{where}/{k}: missing" for k in pinned if k not in got]
        out += [f"{where}/{k}: new" for k in got if k not in pinned and k not in ADDED]
        for k in pinned.keys() & got.keys():
            out += _differences(pinned[k], got[k], f"{where}/{k}")
        return out
    if isinstance(pinned, float) and isinstance(got, int | float):
        parts = where.split("/")
        tolerance = max([1e-6, *(TOLERANCE[k] for k in parts if k in TOLERANCE)])
        return (
            []
            if math.isclose(pinned, got, rel_tol=1e-6, abs_tol=tolerance)
            else [f"{where}: {pinned} -> {got}"]
        )
    return [] if pinned == got else [f"{where}: {pinned!r} -> {got!r}"]


def run_summary(name: str, data_dir: Path, out: Path) -> dict:
    """The summary.json (without wall times) of the pinned run ``name``."""
    from fedprune.cli import main

    args = [*RUNS[name], "--data-dir", str(data_dir), "--out", str(out)]
    assert main(args) == 0, f"fedprune {' '.join(args)} failed"
    return _without_timing(json.loads((out / "summary.json").read_text()))


def write_data(root: Path) -> Path:
    """The fixture datasets (UCI-HAR zip with 6 subjects, MNIST-format patterns)."""
    from fedprune.data import images
    from tests.algorithms.test_fedcref_run import pattern_images
    from tests.conftest import har_arrays, write_uci_har
    from tests.data.test_images import write_idx_pair

    (root / "uci_har").mkdir(parents=True)
    write_uci_har(root / "uci_har", *har_arrays(6, subjects=tuple(range(1, 7))), as_zip=True)
    write_idx_pair(root / "mnist", images.file_names("mnist", "train"), *pattern_images())
    return root


@pytest.fixture(scope="module")
def pinned_data(tmp_path_factory) -> Path:
    return write_data(tmp_path_factory.mktemp("pinned-data"))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(RUNS))
def test_summary_equals_the_pinned_one(name, pinned_data, tmp_path):
    pinned = json.loads(PINS.read_text())[name]
    got = run_summary(name, pinned_data, tmp_path / name)
    assert not _differences(pinned, got), "\n".join(_differences(pinned, got))
    from fedprune.runs.events import read_tags

    tags = read_tags(tmp_path / name)
    assert TAGS[name] <= set(tags), sorted(TAGS[name] - set(tags))
    assert all(len(steps) == len(set(steps)) for steps in tags.values())  # each step once


def test_the_comparison_catches_a_changed_number():
    pinned = {"a": 0.5, "b": {"c": [1, 2]}, "wall_s": 3.0}
    assert _differences(pinned, {"a": 0.5, "b": {"c": [1, 2]}, "wall_s": 3.0}) == []
    assert _differences(pinned, {"a": 0.5 + 1e-9, "b": {"c": [1, 2]}, "wall_s": 3.0}) == []
    assert _differences(pinned, {"a": 0.5001, "b": {"c": [1, 2]}, "wall_s": 3.0}) == [
        "/a: 0.5 -> 0.5001"
    ]
    assert _differences(pinned, {"a": 0.5, "b": {"c": [1, 3]}, "wall_s": 3.0})
    assert _differences(pinned, {"a": 0.5, "wall_s": 3.0}) == ["/b: missing"]
    layers = {"layer_sparsity": {"0": {"conv1": 0.6056}}}
    assert _differences(layers, {"layer_sparsity": {"0": {"conv1": 0.6052}}}) == []
    assert _differences(layers, {"layer_sparsity": {"0": {"conv1": 0.62}}})
    assert _without_timing({"wall_s": 1, "x": {"seconds": 2, "y": 3}}) == {"x": {"y": 3}}


if __name__ == "__main__":  # python -m tests.test_same_results --write
    if sys.argv[1:2] != ["--write"]:
        sys.exit("usage: python -m tests.test_same_results --write [RUNS_FOLDER]")
    import os

    os.environ.setdefault("FEDPRUNE_CACHE_DIR", tempfile.mkdtemp(prefix="pins-cache-"))
    # the run directories are kept (argument 2, default a temporary folder), e.g. to check
    # that a later version still exports them
    keep = Path(sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="pinned-runs-"))
    data = write_data(keep / "data")
    pins = {name: run_summary(name, data, keep / name) for name in sorted(RUNS)}
    PINS.write_text(json.dumps(pins, indent=1, sort_keys=True) + "\n")
    print(f"wrote {PINS}")
