"""Same configuration and seed, same run: summaries and labels of ``fedprune train fedhire``,
``kfed`` and ``fedkmeans`` on a fixed table, as recorded from the runner when each method had
its own branch in it. A change of any value here is a change of results.

Counts, labels and files are compared exactly. The scores (purity, ARI, NMI, accuracy) are
compared to 1e-12 relative: scikit-learn's NMI sums logarithms whose last digit depends on the
CPU's vector code; measured, NMI was 0.4380178291240987 where it was recorded (Intel Xeon,
AVX-512) and 0.4380178291240981 on an AMD EPYC (AVX2), 1.4e-15 apart, while a real change of
the clustering moves it in the second digit."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedprune.algorithms.fedhire.experiment import run_fedhire
from fedprune.configs.fedhire import FedHireConfig, FedKMeansConfig, KFedConfig

pytestmark = pytest.mark.slow

COMMON = dict(dataset="ecoli", partition="paper", num_clients=3, k_star=4, seed=5)
HEAD = dict(dataset="ecoli", partition="paper", seed=5, clients=3, objects=60, k_star=4)

RECORDED = {
    "fedhire": (
        FedHireConfig(**COMMON),
        {
            "method": "fedhire",
            **HEAD,
            "purity": 0.5,
            "ari": 0.1715385838175813,
            "nmi": 0.4380178291240987,
            "acc": 0.4,
            "clusters_found": 4,
            "clusterlets": [15, 9, 2],
            "level_ks": [13],
            "failed_attempts": 0,
            "failures": [],
            "bytes_uploaded": 728,
            "bytes_downloaded": 104,
        },
        [
            [0] * 15 + [3, 2, 3, 3, 3, 3, 2, 2, 3, 0, 2, 2, 2, 2],
            [0] * 9 + [1, 0, 1] + [0] * 15,
            [0, 0, 0, 0],
        ],
    ),
    "kfed": (
        KFedConfig(**COMMON),
        {
            "method": "kfed",
            **HEAD,
            "purity": 0.9833333333333333,
            "ari": 0.9547725410377732,
            "nmi": 0.9554112318368032,
            "acc": 0.9833333333333333,
            "clusters_found": 4,
            "bytes_uploaded": 336,
            "bytes_downloaded": 48,
        },
        [
            [2] + [1] * 6 + [2] * 8 + [0] * 14,
            [3] * 14 + [1] * 6 + [2] * 7,
            [1, 1, 1, 0],
        ],
    ),
    "fedkmeans": (
        FedKMeansConfig(**COMMON, rounds=4),
        {
            "method": "fedkmeans",
            **HEAD,
            "purity": 0.75,
            "ari": 0.6472892187177901,
            "nmi": 0.8181997183290514,
            "acc": 0.7,
            "clusters_found": 4,
            "bytes_uploaded": 1536,
            "bytes_downloaded": 1344,
        },
        [
            [2] + [0] * 6 + [2] * 8 + [1] * 9 + [3, 3, 1, 1, 1],
            [2] * 14 + [0] * 6 + [2] * 7,
            [0, 0, 0, 3],
        ],
    ),
}


def overlapping_ecoli(folder) -> None:
    """An ecoli.data in the official layout: four overlapping classes of 15 objects."""
    rng = np.random.default_rng(7)
    lines = []
    for c, name in enumerate(("cp", "im", "pp", "om")):
        centre = rng.uniform(0.2, 0.8, size=7)
        for i in range(15):
            values = np.clip(centre + 0.12 * rng.normal(size=7), 0, 1)
            lines.append(f"S{c}_{i}_ECOLI " + " ".join(f"{v:.2f}" for v in values) + f" {name}")
    (folder / "uci_tabular" / "ecoli").mkdir(parents=True)
    (folder / "uci_tabular" / "ecoli" / "ecoli.data").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def table_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("overlapping")
    overlapping_ecoli(folder)
    return folder


@pytest.mark.parametrize("name", list(RECORDED))
def test_the_recorded_summary_labels_and_files(name, table_dir, tmp_path, tff_context):
    config, expected, labels = RECORDED[name]
    summary = run_fedhire(config, tmp_path / name, table_dir, progress=False)
    timings = ("cpu_s", "wall_s")
    # the keys and their order; the deploy manifest last (tests/edge_export/test_assigner.py)
    assert list(summary) == [*expected, *timings, "deploy"]
    got = {k: v for k, v in summary.items() if k not in (*timings, "deploy")}
    scores = ("purity", "ari", "nmi", "acc")
    assert {k: v for k, v in got.items() if k not in scores} == {
        k: v for k, v in expected.items() if k not in scores
    }
    for key in scores:  # the CPU's last digit (see the module docstring)
        assert got[key] == pytest.approx(expected[key], rel=1e-12, abs=1e-15), key
    assert summary["deploy"]["kind"] == "assigner"
    saved = np.load(tmp_path / name / "labels.npz")
    assert sorted(saved.files) == sorted(
        [f"client{i}" for i in range(3)] + [f"rows{i}" for i in range(3)]
    )
    for i, want in enumerate(labels):
        assert saved[f"client{i}"].dtype == np.int64
        assert saved[f"client{i}"].tolist() == want
    metrics = (tmp_path / name / "metrics.csv").read_text().splitlines()
    assert metrics[0] == "step,purity,ari,nmi,acc"
    assert metrics[1] == ",".join(
        ["1", *(str(round(expected[k], 6)) for k in ("purity", "ari", "nmi", "acc"))]
    )
    recorded = json.loads((tmp_path / name / "config.json").read_text())
    assert recorded == json.loads(json.dumps(config.recorded()))
    assert recorded["method"] == name
