"""ClusterFL's configuration (defaults from the CA-AFP paper's Tables 5-6)."""

from __future__ import annotations

import dataclasses

from fedprune.checks import NONNEGATIVE, POSITIVE
from fedprune.configs import har
from fedprune.configs.fields import Config, param
from fedprune.configs.protocol import SettledByRunDir
from fedprune.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class ClusterFLConfig(SettledByRunDir, Config):
    """Hyper-parameters; defaults from the CA-AFP paper's Tables 5-6."""

    dataset: str = har.dataset()
    rounds: int = har.rounds()
    clusters: int = har.clusters()
    rho: float = param(5e-3, help="ADMM penalty rho", rule=POSITIVE)
    alpha: float = param(1e-3, help="alpha, weight of tr(W W^T)", rule=NONNEGATIVE)
    beta: float = param(5e-4, help="beta, weight of tr(F^T W W^T F)", rule=NONNEGATIVE)
    clients_per_round: int = har.clients_per_round()
    local_epochs: int = har.local_epochs()
    batch_size: int = har.batch_size()
    learning_rate: float = har.learning_rate()
    ft_epochs: tuple[int, ...] = har.ft_epochs("fine-tuning epochs reported")
    seed: int = har.seed()
    standardize: bool | None = har.standardize()
    split: str | None = har.split()
    label_noise: tuple[float, float] | None = har.label_noise()
    classes_per_client: int | None = har.classes_per_client()
    method: str = har.method("clusterfl")
    dataset_sha256: str | None = har.dataset_sha256()
    model: str = har.model()

    def check(self) -> None:
        # the Omega step's system (2 alpha + rho) I - 2 beta F F^T must be positive definite;
        # F F^T has eigenvalues 0 and 1
        margin = 2 * self.alpha + self.rho - 2 * self.beta
        if margin <= 0:
            raise ConfigError(
                f"--alpha, --rho, --beta: 2 alpha + rho - 2 beta must be > 0 for the Omega "
                f"step, got {margin:g}"
            )
        self._set("ft_epochs", tuple(self.ft_epochs))
