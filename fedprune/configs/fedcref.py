"""FedCRef's configurations.

* :class:`SystemConfig`: the simulated federated system (paper Table 1), or your own
  unlabeled vectors (``--dataset PATH.npz``), and the initial clustering;
* :class:`FedCRefConfig`: the algorithm's hyper-parameters;
* :class:`FedCRefRunConfig`: one flat configuration holding both (what ``fedprune train
  fedcref`` builds; its fields are the two parts' fields, generated from them, so each field's
  default, help and rule is written once). :meth:`~FedCRefRunConfig.recorded` is the dict
  ``config.json`` holds (the two parts' fields, flat).

Your own data is a table ``.npz`` (keys ``x``, ``client_id``, optional ``y``;
:mod:`fedprune.data.tables`): each client's vectors are taken as they are, ``--local-k``
gives every client's number of local clusters K_i (default: the number of distinct classes in
that client's ``y``), and the simulation's options (``--split``, ``--clients``,
``--samples-per-class``, ``--overlap``, ``--max-classes``) are not used. ``--init`` defaults
to ``dirty`` for the built-in datasets (the paper's simulation) and to ``kmeans-ae`` for your
own file (the dirty init simulates a clustering from the classes ``y``; ``--local-k`` is then
not used, K_i being each client's number of classes).

``--local-k auto`` (built-in datasets and your own file): every client chooses its K_i from
its own data, the largest mean silhouette of its k-means clusterings with K = 2 ..
``--max-local-k`` (FedCRef's ``local_k`` module). It needs the real initial
clustering, ``--init kmeans-ae`` (then the default ``--init``); the dirty init simulates a
clustering of each client's classes, whose count it takes as K_i, so the two are refused
together.
"""

from __future__ import annotations

import dataclasses

from fedprune.checks import (
    FRACTION,
    POSITIVE,
    SEED,
    Rule,
    check_count,
    count,
    interval,
    one_of,
    optional,
)
from fedprune.configs import har
from fedprune.configs.fields import Config, param
from fedprune.configs.protocol import builtin_or_user_file, is_user_file
from fedprune.errors import ConfigError

# fedprune.data.images.NAMES (not imported: it loads numpy; tests/configs check they agree)
IMAGE_DATASETS = ("mnist", "fashion_mnist", "kmnist", "emnist_digits")
INITS = ("dirty", "kmeans-ae")
DEFAULT_MODEL = "autoencoder"
# the simulation's options: your own file comes with its clients and their vectors
SIMULATION_FIELDS = frozenset(
    {"split", "num_clients", "samples_per_class", "overlap", "max_classes"}
)
AUTO = har.AUTO  # --local-k auto: each client's K_i chosen from its data
DEFAULT_MAX_LOCAL_K = 10


def _check_model(name: str, value: str) -> str:
    if isinstance(value, str) and (value == DEFAULT_MODEL or value.startswith(har.USER_MODEL)):
        return value
    raise ConfigError(
        f"--model must be {DEFAULT_MODEL} (or your own autoencoder, given to the Python API as "
        f"model_fn), got {value!r}"
    )


def default_init(dataset: str, local_k: int | str | None = None) -> str:
    """``--init`` when it is not given: ``dirty`` (the paper's simulated start) for a built-in
    dataset, ``kmeans-ae`` (an unsupervised start) for your own file or with ``--local-k
    auto`` (K_i chosen from the data needs a real clustering)."""
    return "kmeans-ae" if is_user_file(dataset) or local_k == AUTO else "dirty"


def _parse_local_k(text: str) -> int | str:
    if text == AUTO:
        return AUTO
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"expected an integer K >= 2 or {AUTO}, got {text!r}") from None


def _check_local_k(name: str, value: int | str) -> int | str:
    if value == AUTO:
        return value
    if isinstance(value, str):
        raise ConfigError(f"--local-k must be an integer >= 2 or {AUTO}, got {value!r}")
    return check_count(name, value, 2)


def _unused(config: SystemConfig) -> frozenset[str]:
    """The fields of the system part ``config`` does not use (module docstring): a given
    ``--local-k K`` is read for your own file only (with ``--init kmeans-ae``), ``--local-k
    auto`` everywhere (with ``--init dirty`` it is refused, :func:`_check`), ``--max-local-k``
    only with ``--local-k auto``."""
    unused = set() if config.init == "dirty" else {"dirtiness"}
    auto = config.local_k == AUTO
    if is_user_file(config.dataset):
        unused |= SIMULATION_FIELDS
        if config.init == "dirty" and not auto:  # K_i is each client's number of classes
            unused.add("local_k")
    elif not auto:
        unused.add("local_k")
    if not auto:
        unused.add("max_local_k")
    return frozenset(unused)


def _check(config: Config) -> None:
    """``--local-k auto`` chooses K_i for the k-means start; the dirty start takes each
    client's classes as its clusters, so the two cannot go together."""
    if config.local_k == AUTO and config.init == "dirty":
        raise ConfigError(
            "--local-k auto chooses each client's K_i for the k-means initial clustering, "
            "but --init dirty simulates a clustering of the client's classes (K_i = its "
            "classes); use --init kmeans-ae"
        )


def _settle_init(config: Config) -> None:
    """An unset ``init`` becomes :func:`default_init` of the dataset (before the rules)."""
    if config.init is None:
        config._set("init", default_init(config.dataset, config.local_k))


class _SystemRules(Config):
    """The rules of the system part, for every configuration holding its fields
    (:class:`SystemConfig`, :class:`FedCRefRunConfig`): an unset ``init`` settled first,
    the fields it does not use, ``--local-k auto`` only with the k-means start."""

    def __post_init__(self) -> None:
        _settle_init(self)
        super().__post_init__()

    def unused_fields(self) -> frozenset[str]:
        return _unused(self)

    def check(self) -> None:
        _check(self)


@dataclasses.dataclass(frozen=True)
class SystemConfig(_SystemRules):
    """The simulated federated system (paper Table 1) and its initial clustering."""

    dataset: str = param(
        "mnist",
        help="image dataset, or your own vectors as PATH.npz (keys x, client_id, optional y; "
        "docs/fedcref.md)",
        rule=builtin_or_user_file(IMAGE_DATASETS, "table", "docs/data.md"),
        metavar="{" + ",".join(IMAGE_DATASETS) + ",PATH.npz}",
    )
    split: str = param(
        "train",
        help="dataset split the clients are drawn from (KMNIST here: test)",
        rule=one_of(("train", "test")),
    )
    num_clients: int = param(25, help="clients N", flag="clients", rule=count(2))
    samples_per_class: int = param(500, help="images per class and client S", rule=count())
    overlap: float = param(0.0, help="shared fraction O of a class", rule=FRACTION)
    init: str | None = param(
        None,
        help="initial local clustering: simulated dirty uniform, or k-means on autoencoder "
        "codes with K_i given (or chosen, --local-k auto)",
        rule=one_of(INITS),
        default_text="dirty; kmeans-ae for your own PATH.npz or with --local-k auto",
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
    local_k: int | str | None = param(
        None,
        help="local clusters K_i of every client of your own PATH.npz, or auto: each "
        "client (built-in datasets too) chooses its K_i by the largest mean silhouette of its "
        "k-means clusterings with K = 2..--max-local-k (needs --init kmeans-ae, then the "
        "default)",
        rule=optional(Rule(_check_local_k, f"K >= 2 or {AUTO}")),
        parse=_parse_local_k,
        default_text="the classes in each client's y",
    )
    max_local_k: int = param(
        DEFAULT_MAX_LOCAL_K,
        help="with --local-k auto: the most local clusters a client tries (K_i = 2..this); "
        "every client needs at least this + 1 samples",
        rule=count(2),
        metavar="K",
    )
    dataset_sha256: str | None = har.dataset_sha256()


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
    model: str = param(
        DEFAULT_MODEL,
        help="the autoencoder: the paper's, or your own (user:<name>, given to the Python API "
        "as model_fn)",
        rule=Rule(_check_model, ""),
        cli=False,
    )


class _FedCRefRun(_SystemRules):
    """Methods of :class:`FedCRefRunConfig` (its fields are generated below)."""

    def _part(self, part: type) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(part)}

    def system(self) -> SystemConfig:
        """The system part."""
        return SystemConfig(**self._part(SystemConfig))

    def algorithm(self) -> FedCRefConfig:
        """The algorithm part."""
        return FedCRefConfig(**self._part(FedCRefConfig))

    def recorded(self) -> dict:
        """``config.json``'s dict: ``{"method": "fedcref", **system, **algorithm}``, with the
        fields added later left out where they have the value runs had before they existed,
        so those run directories still match: an unset ``max_classes``, ``local_k`` unset or
        unused (the built-in datasets), ``max_local_k`` without ``--local-k auto``, no
        ``dataset_sha256`` (a built-in dataset) and the paper's ``model``."""
        fields = dataclasses.asdict(self)
        if fields["max_classes"] is None:
            del fields["max_classes"]
        if fields["local_k"] is None or "local_k" in self.unused_fields():
            del fields["local_k"]
        if "max_local_k" in self.unused_fields():
            del fields["max_local_k"]
        if fields["dataset_sha256"] is None:
            del fields["dataset_sha256"]
        if fields["model"] == DEFAULT_MODEL:
            del fields["model"]
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
