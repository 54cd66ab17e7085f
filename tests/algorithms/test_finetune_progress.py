"""Fine-tuning's progress bar moves within an epoch: by each group's share of the clients, so
that its estimate of the time left is live on runs of thousands of clients (one epoch of
3,000 clients is minutes)."""

from __future__ import annotations

import numpy as np
import pytest

from fedprune.algorithms.caafp import finetune
from fedprune.data.partition import ClientData
from fedprune.engine import stacked
from fedprune.models.cnn1d import build_har_cnn

SHAPE = (16, 3)


class Recorder:
    """What a tqdm bar is told: every ``update(n)``."""

    def __init__(self) -> None:
        self.updates: list[float] = []

    def update(self, n: float = 1) -> None:
        self.updates.append(n)


def test_the_bar_advances_per_group_and_adds_up_to_the_epochs(monkeypatch):
    monkeypatch.setattr(stacked, "group_size", lambda model, clients: 1)  # a group per client
    rng = np.random.default_rng(0)
    clients = [
        ClientData(
            cid,
            rng.normal(size=(6, *SHAPE)).astype(np.float32),
            rng.integers(0, 4, 6),
            rng.normal(size=(3, *SHAPE)).astype(np.float32),
            rng.integers(0, 4, 3),
        )
        for cid in (1, 2, 3)
    ]
    start = {c.client_id: build_har_cnn(SHAPE, 4, seed=c.client_id).get_weights() for c in clients}
    masks = {cid: [None for w in weights if w.ndim > 1] for cid, weights in start.items()}
    bar = Recorder()

    finetune.finetune_all(
        SHAPE, 4, clients, start, masks, [1, 2], seed=0, batch_size=4, progress=bar
    )

    assert bar.updates == pytest.approx([1 / 3] * 6)  # 3 groups x 2 epochs
    assert sum(bar.updates) == pytest.approx(2.0)  # the bar's total: the longest fine-tuning
