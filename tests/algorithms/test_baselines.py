"""Baselines on the shared pipeline: their scores against numpy, and tiny end-to-end runs."""

import json

import numpy as np
import pytest

from fedprune.algorithms.efficientfl import magnitude_scores
from fedprune.algorithms.fedsnip import snip_scores
from fedprune.algorithms.oneshot import PruneOnce
from fedprune.methods import METHODS
from fedprune.runs import RunDir


def test_snip_and_magnitude_scores():
    w0 = [np.array([[1.0, -2.0], [0.5, 0.0]])]
    stats = {"grad": [np.array([[0.1, 0.1], [-4.0, 3.0]])]}
    np.testing.assert_allclose(snip_scores(w0, None, stats)[0], [[0.1, 0.2], [2.0, 0.0]])
    np.testing.assert_allclose(magnitude_scores(None, w0, None)[0], [[1.0, 2.0], [0.5, 0.0]])


def test_prune_once_scores_round_one_only():
    policy = PruneOnce(lambda b, a, s: [np.abs(a[0])], target=0.5)
    assert policy.scoring_round(1) and not policy.scoring_round(2)
    masks = policy.update(1, None, [np.array([[1.0, -3.0], [0.2, 2.0]])], [np.ones((2, 2))], {})
    assert masks[0].tolist() == [[0, 1], [0, 1]]


@pytest.mark.slow
@pytest.mark.parametrize(
    "method, phases, sparsity",
    [
        ("fedsnip", (0, 0, 3), 0.7),
        ("efficientfl", (0, 0, 3), 0.7),
        ("fedchar", (1, 2, 0), 0.0),
        ("global_ft", (0, 0, 3), 0.7),
    ],
)
def test_tiny_runs(method, phases, sparsity, tff_context, tmp_path, fixture_data_dir):
    factory = METHODS[method].config
    overrides = dict(phases=phases, clients_per_round=4, local_epochs=1, ft_epochs=(1,))
    if method == "global_ft":
        overrides.update(prune_frequency=1, start_sparsity=0.7)
    config = factory("uci_har", **overrides)
    run = METHODS[method].run_function()
    summary = run(config, tmp_path / "run", fixture_data_dir, progress=False)
    assert summary["method"] == method
    assert summary["sparsity"] == pytest.approx(sparsity, abs=0.01)
    rows = RunDir(tmp_path / "run", json.loads((tmp_path / "run" / "config.json").read_text()))
    phase3 = [float(r["sparsity"]) for r in rows.metrics_rows() if r["phase"] == "prune"]
    if method in ("fedsnip", "efficientfl"):
        # pruned once, at the end of round 1 (logged after the update), never again
        assert len(set(phase3)) == 1
    clusters = set(json.loads((tmp_path / "run" / "clusters.json").read_text()).values())
    assert len(clusters) == (3 if method == "fedchar" else 1)
    if method != "fedchar":  # K = 1: no clustering round, no clustering traffic
        assert summary["comm_mb_eq13_by_kind"]["clustering"] == 0.0
