"""experiments/fedcref_association_scores.py on a tiny MNIST-format fixture."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from fedprune.algorithms.fedcref.experiment import simulated_clients
from fedprune.configs.fedcref import SystemConfig
from fedprune.data import images
from tests.algorithms.test_fedcref_run import pattern_images
from tests.data.test_images import write_idx_pair

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "fedcref_association_scores.py"

pytestmark = pytest.mark.slow


def _script():
    spec = importlib.util.spec_from_file_location("fedcref_association_scores", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_cross_client_pair_is_scored_once_with_its_class(tmp_path):
    x, y = pattern_images()
    write_idx_pair(tmp_path / "mnist", images.file_names("mnist", "train"), x, y)
    script = _script()
    scores, same = script.pair_scores("mnist", "train", 5, 2, 0, str(tmp_path), num_clients=3)
    clients = simulated_clients(
        SystemConfig("mnist", num_clients=3, samples_per_class=5), 0, tmp_path
    )
    ks = [len(c.classes) for c in clients]
    cross = (sum(ks) ** 2 - sum(k * k for k in ks)) // 2
    assert len(scores) == len(same) == cross
    classes = [cls for c in clients for cls in c.classes]
    owners = [c.client_id for c in clients for _ in c.classes]
    expected = [
        classes[a] == classes[b]
        for a in range(len(classes))
        for b in range(a + 1, len(classes))
        if owners[a] != owners[b]
    ]
    assert same.tolist() == expected
    assert np.all((scores >= 0) & (scores <= 1))
