"""FedAvg's configuration (CA-AFP's Phase 1 alone)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import ClassVar

from fedprune.configs import har
from fedprune.configs.fields import Config
from fedprune.configs.protocol import BEFORE_SPLIT, SettledByRunDir


@dataclasses.dataclass(frozen=True)
class FedAvgConfig(SettledByRunDir, Config):
    """Hyper-parameters (defaults: the CA-AFP paper's Tables 5-6)."""

    ADDED_LATER: ClassVar[Mapping] = {"eval_every": 5, **BEFORE_SPLIT}

    dataset: str = har.dataset()
    rounds: int = har.rounds()
    clients_per_round: int = har.clients_per_round()
    local_epochs: int = har.local_epochs()
    batch_size: int = har.batch_size()
    learning_rate: float = har.learning_rate()
    eval_every: int = har.eval_every()
    seed: int = har.seed()
    standardize: bool | None = har.standardize()
    split: str | None = har.split()
    label_noise: tuple[float, float] | None = har.label_noise()
    classes_per_client: int | None = har.classes_per_client()
    method: str = har.method("fedavg")
    dataset_sha256: str | None = har.dataset_sha256()
    model: str = har.model()
