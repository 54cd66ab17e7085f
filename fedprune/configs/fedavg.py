"""FedAvg's configuration (:mod:`fedprune.algorithms.fedavg`; CA-AFP's Phase 1 alone)."""

from __future__ import annotations

import dataclasses
import os

from fedprune.configs import har
from fedprune.configs.fields import Config
from fedprune.configs.protocol import BEFORE_SPLIT, settle


@dataclasses.dataclass(frozen=True)
class FedAvgConfig(Config):
    """Hyper-parameters (defaults: the CA-AFP paper's Tables 5-6)."""

    dataset: str = har.dataset()
    rounds: int = har.rounds()
    clients_per_round: int = har.clients_per_round()
    local_epochs: int = har.local_epochs()
    batch_size: int = har.batch_size()
    learning_rate: float = har.learning_rate()
    seed: int = har.seed()
    standardize: bool | None = har.standardize()
    split: str | None = har.split()
    label_noise: tuple[float, float] | None = har.label_noise()
    classes_per_client: int | None = har.classes_per_client()
    method: str = har.method("fedavg")
    dataset_sha256: str | None = har.dataset_sha256()
    model: str = har.model()

    def record_in(self, out: str | os.PathLike) -> dict:
        """The HAR protocol settled for ``out`` (:func:`fedprune.configs.protocol.settle`)."""
        return settle(self, out, BEFORE_SPLIT)[1]
