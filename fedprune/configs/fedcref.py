"""FedCRef's configurations (:mod:`fedprune.algorithms.fedcref`).

* :class:`SystemConfig`: the simulated federated system (paper Table 1) and its initial
  clustering;
* :class:`FedCRefConfig`: the algorithm's hyper-parameters;
* :class:`FedCRefRunConfig`: one flat configuration holding both (what ``fedprune train
  fedcref`` builds; its fields are the two parts' fields, generated from them, so each field's
  default, help and rule is written once). :meth:`~FedCRefRunConfig.recorded` is the dict
  ``config.json`` holds (as before this class existed).
"""

from __future__ import annotations

import dataclasses

from fedprune.checks import FRACTION, POSITIVE, SEED, count, interval, one_of, optional
from fedprune.configs import har
from fedprune.configs.fields import Config, param

# fedprune.data.images.NAMES (not imported: it loads numpy; tests/configs check they agree)
IMAGE_DATASETS = ("mnist", "fashion_mnist", "kmnist", "emnist_digits")
INITS = ("dirty", "kmeans-ae")


@dataclasses.dataclass(frozen=True)
class SystemConfig(Config):
    """The simulated federated system (paper Table 1) and its initial clustering."""

    dataset: str = param("mnist", help="image dataset", rule=one_of(IMAGE_DATASETS))
    split: str = param(
        "train",
        help="dataset split the clients are drawn from (KMNIST here: test)",
        rule=one_of(("train", "test")),
    )
    num_clients: int = param(25, help="clients N", flag="clients", rule=count(2))
    samples_per_class: int = param(500, help="images per class and client S", rule=count())
    overlap: float = param(0.0, help="shared fraction O of a class", rule=FRACTION)
    init: str = param(
        "dirty",
        help="initial local clustering: simulated dirty uniform, or k-means on autoencoder "
        "codes with K_i given",
        rule=one_of(INITS),
    )
    dirtiness: float = param(
        0.3, help="misassigned fraction for --init dirty", rule=interval(0, 1, high_open=True)
    )
    max_classes: int | None = param(
        None,
        help="largest K_i (classes per client); K_i is uniform in [2, this]",
        rule=optional(count(2)),
        default_text="K_G/2, the paper",
    )

    def unused_fields(self) -> frozenset[str]:
        return frozenset() if self.init == "dirty" else frozenset({"dirtiness"})


@dataclasses.dataclass(frozen=True)
class FedCRefConfig(Config):
    """Hyper-parameters; defaults are the paper's Table 1-2 (alpha, theta, tau, epochs,
    FL rounds) and our choices where it is silent (batch size, learning rate, FL local
    epochs, iteration cap, stop window/tolerance from Phase 5's "10 % over three
    consecutive iterations")."""

    alpha: float = param(
        75.0, help="percentile of the association test", rule=interval(0, 100, low_open=True)
    )
    theta: float = param(0.2, help="association threshold", rule=FRACTION)
    tau: float = param(0.8, help="client stability threshold on ACC", rule=FRACTION)
    local_epochs: int = param(20, help="local autoencoder epochs", flag="epochs", rule=count())
    fl_rounds: int = param(15, help="FedAvg rounds per community", rule=count())
    fl_local_epochs: int = param(1, help="local epochs per FedAvg round", rule=count())
    batch_size: int = har.batch_size()
    learning_rate: float = param(1e-3, help="Adam learning rate", flag="lr", rule=POSITIVE)
    max_iterations: int = param(30, help="safety cap on iterations", rule=count())
    stop_window: int = param(3, help="iterations of the global stop", rule=count(2), cli=False)
    stop_tolerance: float = param(
        0.1,
        help="relative change of the global stop",
        rule=interval(0, 1, high_open=True),
        cli=False,
    )
    seed: int = param(0, help="seed of the system, initial clusters, models", rule=SEED)


class _FedCRefRun(Config):
    """Methods of :class:`FedCRefRunConfig` (its fields are generated below)."""

    unused_fields = SystemConfig.unused_fields

    def _part(self, part: type) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(part)}

    def system(self) -> SystemConfig:
        """The system part."""
        return SystemConfig(**self._part(SystemConfig))

    def algorithm(self) -> FedCRefConfig:
        """The algorithm part."""
        return FedCRefConfig(**self._part(FedCRefConfig))

    def recorded(self) -> dict:
        """``config.json``'s dict: ``{"method": "fedcref", **system, **algorithm}``, with an
        unset ``max_classes`` left out, so run directories written before the option existed
        still match."""
        fields = dataclasses.asdict(self)
        if fields["max_classes"] is None:
            del fields["max_classes"]
        return fields


def _copy(field: dataclasses.Field) -> dataclasses.Field:
    return dataclasses.field(default=field.default, metadata=field.metadata)


FedCRefRunConfig = dataclasses.make_dataclass(
    "FedCRefRunConfig",
    [("method", str, har.method("fedcref"))]
    + [
        (f.name, f.type, _copy(f))
        for p in (SystemConfig, FedCRefConfig)
        for f in dataclasses.fields(p)
    ],
    bases=(_FedCRefRun,),
    frozen=True,
)
FedCRefRunConfig.__module__ = __name__
FedCRefRunConfig.__doc__ = (
    "One FedCRef run: ``method`` and every field of :class:`SystemConfig` and "
    ":class:`FedCRefConfig`, in that order; :meth:`system` and :meth:`algorithm` give the parts."
)
