"""The configurations of the one-shot clustering family on the 10 UCI tables: Fed-HIRE, its
k-FED baseline and multi-round federated k-means. Defaults are the Fed-HIRE paper's §4.1 (η,
k0 ratio 0.5 for FCPL and MCPL, L = 8 clients) and the
readings of the package docstring.

Each configuration class is the key of its clusterer in :data:`CLUSTERERS`, which the module
of the clusterers fills when it is imported (so the command line stays free of TensorFlow);
:meth:`FedHireConfig.clusterer` builds the one registered, and the family's one runner runs
whichever it is given. The k-means baselines keep Fed-HIRE's competitive-learning fields,
unused, so that every ``config.json`` of the family has the same keys."""

from __future__ import annotations

import dataclasses
from typing import Any

from fedprune.checks import POSITIVE, SEED, count, interval, one_of, optional
from fedprune.configs import har
from fedprune.configs.fields import Config, param
from fedprune.configs.protocol import builtin_or_user_file, is_user_file
from fedprune.configs.strategies import ByConfig
from fedprune.data.names import TABULAR_NAMES

TABULAR_DATASETS = TABULAR_NAMES  # the UCI tables, in the order of Fed-HIRE's Table 2
# the keys of Fed-HIRE's CLIENT_STEPS and SERVER_ATTEMPTS (its algorithm module; not
# imported, as above; tests/algorithms/fedhire check they agree)
CLIENT_METHODS = ("fcpl", "kmeans")
SERVER_METHODS = ("mcpl", "kmeans")
# Fed-HIRE's competitive-learning fields: recorded by the k-means baselines, never used there
COMPETITIVE_LEARNING_FIELDS = frozenset({"eta", "k0_ratio", "client_method", "server_method"})


@dataclasses.dataclass(frozen=True)
class FedHireConfig(Config):
    """One Fed-HIRE run (``method`` fedhire): FCPL on the clients, MCPL, the data-enhanced
    representation and weighted k-modes on the server (Table 4's k-means in place of either
    with ``client_method`` / ``server_method``). The fields up to ``seed`` are the whole
    family's: the table, its split over the clients, k* and the seed."""

    dataset: str = param(
        help="UCI table, or your own table as PATH.npz (keys x, client_id, optional y; "
        "docs/data.md)",
        rule=builtin_or_user_file(TABULAR_DATASETS, "table", "docs/data.md"),
        metavar="{" + ",".join(TABULAR_DATASETS) + ",PATH.npz}",
    )
    partition: str = param(
        "authors",
        help="clients: the authors' 8 splits, or the paper's text (k-means clusterlets of each "
        "class to random clients)",
        rule=one_of(("authors", "paper")),
    )
    num_clients: int = param(8, help="clients L (--partition paper)", flag="clients", rule=count())
    k_star: int | None = param(
        None, help="clusters k*", rule=optional(count(2)), default_text="the table's classes"
    )
    eta: float = param(0.05, help="learning rate of the competitive learning", rule=POSITIVE)
    k0_ratio: float = param(
        0.5,
        help="initial clusters k0 as a fraction of the objects",
        rule=interval(0, 1, low_open=True),
    )
    client_method: str = param(
        "fcpl",
        help="client clustering (kmeans: Table 4's ablation)",
        rule=one_of(CLIENT_METHODS),
    )
    server_method: str = param(
        "mcpl",
        help="server clustering (kmeans: Table 4's ablation)",
        rule=one_of(SERVER_METHODS),
    )
    seed: int = param(0, help="seed of the partition and the clustering", rule=SEED)
    method: str = har.method("fedhire")
    dataset_sha256: str | None = har.dataset_sha256()

    def recorded(self) -> dict:
        """``config.json``'s record: the SHA-256 only for your own file (a built-in table's
        runs record none, as before it existed); for your own table, no partition and no
        number of clients (it comes with its clients)."""
        record = dataclasses.asdict(self)
        if record["dataset_sha256"] is None:
            del record["dataset_sha256"]
        if is_user_file(self.dataset):
            del record["partition"], record["num_clients"]
        return record

    def unused_fields(self) -> frozenset[str]:
        if is_user_file(self.dataset):  # your table comes with its clients
            return frozenset({"partition", "num_clients"})
        return frozenset() if self.partition == "paper" else frozenset({"num_clients"})

    def clusterer(self) -> Any:  # noqa: ANN401 (the family's Clusterer)
        """The clusterer this configuration describes: the class registered for its
        configuration class in :data:`CLUSTERERS`, built by its ``from_config(config)``."""
        return CLUSTERERS.of(self).from_config(self)


@dataclasses.dataclass(frozen=True)
class KFedConfig(FedHireConfig):
    """k-FED: one-shot federated k-means (local k-means, server k-means of the centres)."""

    method: str = har.method("kfed")

    def unused_fields(self) -> frozenset[str]:
        return super().unused_fields() | COMPETITIVE_LEARNING_FIELDS


@dataclasses.dataclass(frozen=True)
class FedKMeansConfig(FedHireConfig):
    """Multi-round federated k-means (TFF's ``build_fed_kmeans``): the iterative baseline."""

    rounds: int = param(20, help="federated k-means rounds", rule=count())
    method: str = har.method("fedkmeans")

    def unused_fields(self) -> frozenset[str]:
        return super().unused_fields() | COMPETITIVE_LEARNING_FIELDS


CLUSTERERS: ByConfig[Any] = ByConfig("clusterer", attribute="CLUSTERER")
"""Each method's clusterer class (built by its ``from_config(config)``), by configuration
class; filled by the module of the clusterers when it is imported."""
