"""The clients of a FedCRef run: the simulated system (paper Sec. 5.2-5.4) or your table's
clients, every check of them, each client's number of local clusters K_i and its initial
clustering.

The simulated system's clients are drawn from a built-in image dataset
(:func:`~fedprune.data.clustered_partition.partition_clients`); K_i is each client's number of
classes. Your table's clients (:func:`user_federation`) are its distinct client ids in
ascending order; K_i is ``--local-k``, else the client's number of distinct classes.
``--local-k auto`` has every client choose its K_i from its own data instead
(:func:`choose_local_ks`), once: a resumed run reads the choice back from its
``local_k.json`` (:class:`RunClients`). The initial clustering is ``dirty`` uniform with
``dirtiness`` (it needs the classes) or ``kmeans-ae`` (:func:`initial_clusters`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np
from tqdm import tqdm

from fedprune.algorithms.fedcref.algorithm import validate_inputs
from fedprune.algorithms.fedcref.initial import kmeans_on_embeddings
from fedprune.algorithms.fedcref.local_k import (
    LocalKChoice,
    check_choosable,
    choose_from_data,
    local_k_record,
    read_local_k,
    write_local_k,
)
from fedprune.algorithms.fedcref.local_models import LocalTrainer, cluster_seed
from fedprune.algorithms.fedcref.system_size import check_fits
from fedprune.configs.fedcref import AUTO, DEFAULT_MODEL, FedCRefRunConfig, SystemConfig
from fedprune.configs.protocol import dataset_label, is_user_file
from fedprune.data.clustered_partition import ClientImages, dirty_uniform, partition_clients
from fedprune.data.images import load_images
from fedprune.data.tables import ClientTable, read_table_npz
from fedprune.engine import interrupts
from fedprune.engine.compose import Inputs, settled_file
from fedprune.errors import ConfigError, DataError
from fedprune.models.user import UserModel
from fedprune.runs import RunDir

SIMULATED = "the simulated system"
"""How errors name the simulated system's data."""

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Federation:
    """The clients FedCRef runs on: each one's vectors ``xs`` (float32 (n_i, d)) and number
    of local clusters ``ks`` (K_i; ``None`` for your file with ``--local-k auto`` until the
    clients choose them, :meth:`with_ks`); ``clients``, the same clients with their classes
    (for the scores and the dirty init), or ``None`` without classes; ``ids``, your file's
    client ids in client order (``None`` for the simulated system, whose clients are
    0 .. N-1); ``where``, how errors and the progress bar name the data."""

    xs: list[np.ndarray]
    ks: list[int] | None
    clients: list[ClientImages] | None
    ids: list[int] | None = None
    where: str = SIMULATED

    @classmethod
    def of_images(cls, clients: list[ClientImages]) -> Federation:
        """The simulated system's clients."""
        return cls([c.x for c in clients], [c.num_classes for c in clients], clients)

    @classmethod
    def of_run(
        cls,
        system: SystemConfig,
        seed: int,
        inputs: Inputs,
        model: str | UserModel = DEFAULT_MODEL,
    ) -> Federation:
        """The clients of a run of ``system`` (seeded by ``seed``), with every check before
        anything is trained: your table (the one handed in as ``table``, else read from
        ``system.dataset``, :func:`user_federation`) or the simulated system
        (:func:`simulated_clients`, from ``inputs.data_dir``); with ``--local-k auto``, every
        client can score K = 2..``system.max_local_k`` (:func:`check_local_ks`)."""
        if is_user_file(system.dataset):
            table = inputs.get("table")
            table = read_table_npz(system.dataset) if table is None else table
            federation = user_federation(system, table, model)
        else:
            federation = cls.of_images(simulated_clients(system, seed, inputs.data_dir))
        if system.local_k == AUTO:
            check_local_ks(system, federation)
        return federation

    @property
    def yours(self) -> bool:
        """Whether these are your table's clients (else the simulated system's)."""
        return self.ids is not None

    @property
    def input_dim(self) -> int:
        """The length of every client's vectors."""
        return int(self.xs[0].shape[1])

    @property
    def labels(self) -> list[np.ndarray] | None:
        return None if self.clients is None else [c.labels for c in self.clients]

    @property
    def class_counts(self) -> list[int] | None:
        """Each client's number of distinct classes (``None`` without classes)."""
        return None if self.clients is None else [len(c.classes) for c in self.clients]

    def with_ks(self, ks: list[int]) -> Federation:
        """The same clients with the K_i ``ks`` (``--local-k auto``'s choice)."""
        return dataclasses.replace(self, ks=list(ks))

    @property
    def true_categories(self) -> int | None:
        """The number of distinct classes over all clients (``None`` without classes)."""
        if self.clients is None:
            return None
        return len(set().union(*(c.classes for c in self.clients)))


@dataclasses.dataclass(frozen=True)
class LocalFits:
    """How every client fits its autoencoder before the first iteration (the initial
    clustering, ``--local-k auto``'s choice): ``system``'s settings, the run's ``seed``,
    ``epochs`` of ``model``, and with ``progress`` a bar over the clients."""

    system: SystemConfig
    seed: int
    epochs: int
    model: str | UserModel = DEFAULT_MODEL
    progress: bool = False

    def on_each_client(
        self,
        federation: Federation,
        description: str,
        fit: Callable[[int, np.ndarray, LocalTrainer], T],
    ) -> list[T]:
        """``fit(i, x_i, trainer)`` for every client in order, with one autoencoder trainer
        shared by all; with :attr:`progress`, a bar over the clients (``description``)."""
        trainer = LocalTrainer(federation.xs[0].shape[1], self.epochs, model=self.model)
        clients = tqdm(
            list(enumerate(federation.xs)),
            desc=description,
            unit="client",
            leave=False,
            disable=not self.progress,
        )
        return [fit(i, x, trainer) for i, x in clients]


@dataclasses.dataclass(frozen=True)
class RunClients:
    """The clients of a FedCRef run as its iterations start: the ``federation`` with every
    client's K_i, their ``initial`` clusterings, and ``choices``, the ``--local-k auto``
    choice this start made (``None`` where it made none: K_i given or counted, or a resumed
    run's K_i read from its ``local_k.json``)."""

    federation: Federation
    initial: list[np.ndarray]
    choices: list[LocalKChoice] | None = None

    @classmethod
    def prepared(
        cls, federation: Federation, fits: LocalFits, existing: RunDir | None
    ) -> RunClients:
        """``federation``'s clients with their K_i and initial clusterings (``fits``): with
        ``--local-k auto``, the K_i recorded in the unfinished run ``existing``, else chosen
        now (:func:`choose_local_ks`); checked to be consistent
        (:func:`~fedprune.algorithms.fedcref.algorithm.validate_inputs`)."""
        system, chosen = fits.system, None
        auto = system.local_k == AUTO
        if existing is not None and auto:  # resumed: the recorded choice
            chosen = read_local_k(existing.path, len(federation.xs), system.max_local_k)
        if auto and chosen is None:
            choices, initial = choose_local_ks(fits, federation)
            clients = cls(federation.with_ks([c.chosen for c in choices]), initial, choices)
        else:
            started = federation if chosen is None else federation.with_ks(chosen)
            clients = cls(started, initial_clusters(fits, started))
        validate_inputs(federation.xs, clients.federation.ks, clients.initial)
        return clients

    def write_choice(self, run: Path) -> None:
        """The ``local_k.json`` of the choice this start made (nothing where it made none)
        in the run directory ``run``."""
        if self.choices is not None:
            federation = self.federation
            record = local_k_record(self.choices, federation.class_counts, federation.ids)
            write_local_k(run, record)


def settled_dataset(
    config: FedCRefRunConfig, out: Path, table: ClientTable | None
) -> tuple[FedCRefRunConfig, dict]:
    """``config`` and its record for the run directory ``out``: with your file's SHA-256
    where the file exists (a ``table`` handed in may name a path only); a table handed in
    needs ``config.dataset`` to name a ``.npz``."""
    if table is not None and not is_user_file(config.dataset):
        raise ConfigError(
            f"a table was given but --dataset is {config.dataset!r}; give the path of the "
            ".npz it is recorded as"
        )
    if table is None or Path(config.dataset).is_file():
        return settled_file(config, out)
    return config, config.recorded()


def simulated_clients(
    system: SystemConfig, seed: int, data_dir: str | os.PathLike | None
) -> list[ClientImages]:
    """The simulated system's clients; an impossible ``--clients`` or ``--samples-per-class``
    is refused as soon as the class sizes are known."""
    data = load_images(system.dataset, system.split, data_dir)
    check_fits(
        np.unique(data.y, return_counts=True)[1],
        system.num_clients,
        system.samples_per_class,
        system.overlap,
        system.max_classes,
        f"{system.dataset} ({system.split})",
    )
    return partition_clients(
        data,
        system.num_clients,
        system.samples_per_class,
        system.overlap,
        seed,
        max_classes=system.max_classes,
    )


def user_federation(
    system: SystemConfig, table: ClientTable, model: str | UserModel = DEFAULT_MODEL
) -> Federation:
    """Your table's clients (module text), checked before anything is trained: at least 2
    clients, K_i given or countable, no more clusters than a client has vectors, classes for
    ``--init dirty``, and values in [0, 1] for the paper's autoencoder (``model``)."""
    where = dataset_label(system.dataset)
    ids = [int(c) for c in table.clients]
    if len(ids) < 2:
        raise ConfigError(f"{where} holds {len(ids)} client; FedCRef needs at least 2 clients")
    ys = table.client_y()
    if system.init == "dirty" and ys is None:
        raise ConfigError(
            f"--init dirty simulates a clustering from the classes y, which {where} does not "
            "hold; use --init kmeans-ae"
        )
    if not isinstance(model, UserModel):
        low, high = float(table.x.min()), float(table.x.max())
        if low < 0.0 or high > 1.0:
            raise DataError(
                f"{where}: x holds values in [{low:g}, {high:g}], but the default autoencoder "
                "ends in a sigmoid and reconstructs values in [0, 1] only; scale your "
                "features to [0, 1] (e.g. min-max per feature), or bring your own autoencoder"
            )
    xs = [np.asarray(x, np.float32) for x in table.client_x()]
    ks: list[int] | None
    if system.local_k == AUTO:  # chosen from the data (choose_local_ks)
        ks = None
    elif system.init != "dirty" and system.local_k is not None:
        ks = [system.local_k] * len(xs)
    elif ys is not None:
        ks = [int(np.unique(y).size) for y in ys]
    else:
        raise ConfigError(
            f"{where} holds no classes y to count each client's local clusters K_i; pass "
            "--local-k K"
        )
    for cid, x, k in zip(ids, xs, ks or ()):
        if k > len(x):
            raise ConfigError(
                f"client {cid} of {where} holds {len(x)} vectors, fewer than its K_i = {k} "
                "local clusters; pass a smaller --local-k"
            )
    clients = None
    if ys is not None:
        clients = [
            ClientImages(i, x, y, tuple(int(c) for c in np.unique(y)))
            for i, (x, y) in enumerate(zip(xs, ys))
        ]
    return Federation(xs, ks, clients, ids, where)


def client_names(ids: list[int] | range, where: str) -> list[str]:
    """How errors name each client: ``client <id> of <where>``."""
    return [f"client {i} of {where}" for i in ids]


def check_local_ks(system: SystemConfig, federation: Federation) -> list[str]:
    """``--local-k auto``: every client of ``federation`` can score K =
    2..``system.max_local_k`` (one ConfigError line otherwise); returns how errors name each
    client."""
    ids = federation.ids if federation.ids is not None else range(len(federation.xs))
    names = client_names(ids, federation.where)
    check_choosable([len(x) for x in federation.xs], system.max_local_k, names)
    return names


def initial_clusters(fits: LocalFits, federation: Federation) -> list[np.ndarray]:
    """Each client's initial clustering: dirty uniform (needs the classes) or k-means on the
    codes of ``fits.model`` fit for ``fits.epochs`` to the client's vectors, K_i clusters."""
    system, seed = fits.system, fits.seed
    if system.init == "dirty":
        if federation.clients is None:  # user_federation refuses this first
            raise ConfigError("--init dirty needs the clients' classes; use --init kmeans-ae")
        initial = [
            dirty_uniform(c, system.dirtiness, cluster_seed(seed, 0, c.client_id))
            for c in federation.clients
        ]
    else:
        initial = fits.on_each_client(
            federation,
            "initial clusters (autoencoder + k-means per client)",
            lambda i, x, trainer: kmeans_on_embeddings(
                x, federation.ks[i], trainer, cluster_seed(seed, 0, i)
            ),
        )
    interrupts.raise_if_received()
    return initial


def choose_local_ks(
    fits: LocalFits, federation: Federation
) -> tuple[list[LocalKChoice], list[np.ndarray]]:
    """``--local-k auto``: every client's choice of K_i
    (:func:`~fedprune.algorithms.fedcref.local_k.choose_from_data`, at most
    ``fits.system.max_local_k``) and its initial clustering, the k-means of the chosen K_i on
    the codes of ``fits.model`` fit to the client's vectors, with the client's seed of
    :func:`initial_clusters` (so equal to ``--init kmeans-ae --local-k K_i``)."""
    system, seed = fits.system, fits.seed
    if system.init == "dirty":  # the configuration refuses this first
        raise ConfigError("--local-k auto needs --init kmeans-ae")
    names = check_local_ks(system, federation)
    chosen = fits.on_each_client(
        federation,
        f"choosing K_i (autoencoder + k-means, K = 2..{system.max_local_k} per client)",
        lambda i, x, trainer: choose_from_data(
            x, system.max_local_k, trainer, cluster_seed(seed, 0, i), names[i]
        ),
    )
    interrupts.raise_if_received()
    return [choice for choice, _ in chosen], [labels for _, labels in chosen]


def build_system(
    system: SystemConfig,
    seed: int,
    data_dir: str | os.PathLike | None,
    epochs: int,
    model: str | UserModel = DEFAULT_MODEL,
) -> tuple[list[ClientImages], list[np.ndarray]]:
    """The simulated clients and their initial clusterings; an impossible ``--clients`` or
    ``--samples-per-class`` is refused as soon as the class sizes are known."""
    clients = simulated_clients(system, seed, data_dir)
    fits = LocalFits(system, seed, epochs, model)
    return clients, initial_clusters(fits, Federation.of_images(clients))
