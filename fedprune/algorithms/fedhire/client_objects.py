"""The clients' objects of a one-shot clustering run, and what a clusterer made of them.

:class:`ClientObjects` is the table loaded in its original format and split over the clients
(:func:`load_federation`), or handed in already split, with every client's objects checked
(:func:`.algorithm.check_client_data`) and ``k*`` settled: all before the run writes
anything, so that a refused start leaves no run directory. :class:`LabelledObjects` is a
clusterer's :class:`~.clusterers.Clustering` of them: its scores against the classes (where
the table has them), the files it leaves in the run directory (``metrics.csv``'s one row,
``labels.npz``, ``assigner.npz``) and its entries of ``summary.json``
(:meth:`LabelledObjects.record`).
"""

from __future__ import annotations

import dataclasses
import functools
import os

import numpy as np

from fedprune.algorithms.fedhire import metrics
from fedprune.algorithms.fedhire.algorithm import check_client_data
from fedprune.algorithms.fedhire.clusterers import Clusterer, Clustering
from fedprune.configs.fedhire import FedHireConfig
from fedprune.configs.protocol import is_user_file
from fedprune.data.table_partition import FederatedSplit, make_split
from fedprune.data.tables import read_table_npz
from fedprune.data.uci_tabular import load_tabular
from fedprune.errors import ConfigError
from fedprune.runs import RunDir, names
from fedprune.runs.assigner import Assigner
from fedprune.runs.files import write_npz


def load_federation(
    config: FedHireConfig, data_dir: str | os.PathLike | None = None
) -> tuple[FederatedSplit, int | None, tuple[int, ...] | None]:
    """The table ``config.dataset`` split over the clients as ``config.partition`` says
    (z-scored, :func:`~fedprune.data.table_partition.make_split`), the number of classes the
    table names (the default ``k*``) and the clients' own ids (``None``: clients 0 .. L-1).
    Your own ``.npz`` table (:mod:`fedprune.data.tables`) comes with its clients, in
    ascending order of their ids, and is taken as it is (not z-scored), each client's rows
    being their row numbers in your table (``labels.npz``'s ``rows<l>``); its number of
    classes is that of the distinct ``y`` (``None`` without ``y``)."""
    if is_user_file(config.dataset):
        mine = read_table_npz(config.dataset)
        rows = [np.flatnonzero(mine.client == c) for c in mine.clients]
        split = FederatedSplit(rows, mine.x, mine.y)
        classes = None if mine.y is None else int(np.unique(mine.y).size)
        return split, classes, tuple(int(c) for c in mine.clients)
    table = load_tabular(config.dataset, data_dir)
    split = make_split(
        config.dataset, table.x, table.y, config.partition, config.num_clients, config.seed
    )
    split = dataclasses.replace(split, columns=tuple(table.feature_names))
    return split, table.num_classes, None


@dataclasses.dataclass(frozen=True)
class ClientObjects:
    """What a clusterer is given: ``split``, the table split over the clients; ``objects``,
    each client's rows as checked float64 arrays; ``k_star``, the number of clusters asked
    for; ``ids``, the clients' own ids in client order (your table's; ``None``: 0 .. L-1)."""

    split: FederatedSplit
    objects: list[np.ndarray]
    k_star: int
    ids: tuple[int, ...] | None = None

    @classmethod
    def of(
        cls,
        config: FedHireConfig,
        table: FederatedSplit | None = None,
        data_dir: str | os.PathLike | None = None,
    ) -> ClientObjects:
        """The clients' objects of a run of ``config``: ``table`` where given (then nothing
        is loaded and ``k*`` defaults to its distinct classes), else :func:`load_federation`'s
        (the table's classes). Refused (``ConfigError``) where a client's objects fail
        :func:`~.algorithm.check_client_data`, then where no ``k*`` is given and the table
        has no classes to count."""
        if table is None:
            split, classes, ids = load_federation(config, data_dir)
        else:
            split, ids = table, None
            classes = None if table.y is None else int(np.unique(table.y).size)
        objects = check_client_data(split.client_x())
        k_star = config.k_star or classes
        if k_star is None:
            raise ConfigError("--k-star is needed: the clients' table has no classes to count")
        return cls(split, objects, k_star, ids)

    def clustered(self, clusterer: Clusterer, seed: int) -> LabelledObjects:
        """The objects labelled by ``clusterer`` into ``k_star`` clusters (``seed``: its
        randomness)."""
        return LabelledObjects(self, clusterer.cluster(self.objects, self.k_star, seed))


@dataclasses.dataclass(frozen=True)
class LabelledObjects:
    """The clients' objects (``data``) and a clusterer's labels of them (``clustering``)."""

    data: ClientObjects
    clustering: Clustering

    @functools.cached_property
    def predicted(self) -> np.ndarray:
        """Every object's label, the clients' one after the other."""
        return np.concatenate(list(self.clustering.labels))

    @functools.cached_property
    def scores(self) -> dict[str, float]:
        """Purity, ARI, NMI and ACC against the table's classes (:func:`.metrics.evaluate`);
        none where the table has no classes."""
        truth = self.data.split.client_y()
        return {} if truth is None else metrics.evaluate(np.concatenate(truth), self.predicted)

    def write(self, run: RunDir) -> Assigner | None:
        """The labels' files in ``run``: ``metrics.csv``'s one row of scores (where there are
        scores), ``labels.npz`` (each client's labels ``client<l>`` and row indices
        ``rows<l>``) and, where the clusterer keeps one, ``assigner.npz`` with the table's
        encoding and the clients' objects; returns that assigner (``None`` without one)."""
        if self.scores:
            run.append_metrics({"step": 1, **{k: round(v, 6) for k, v in self.scores.items()}})
        write_npz(
            run.path / names.LABELS,
            {
                **{f"client{i}": p for i, p in enumerate(self.clustering.labels)},
                **{f"rows{i}": r for i, r in enumerate(self.data.split.rows)},
            },
        )
        if self.clustering.assigner is None:
            return None
        split = self.data.split
        assigner = self.clustering.assigner.with_encoding(split.mean, split.scale, split.columns)
        assigner = assigner.with_objects(self.data.objects)
        assigner.write(run.path)
        return assigner

    def record(self) -> dict:
        """The summary's entries of the clustering: the clients (and their own ids where
        your table names them), the objects, ``k_star``, the scores, the clusters found, what
        the clusterer adds (:attr:`~.clusterers.Clustering.details`) and the bytes its
        protocol moved up and down."""
        data, clustering = self.data, self.clustering
        return {
            "clients": len(data.objects),
            **({} if data.ids is None else {"client_ids": list(data.ids)}),
            "objects": int(self.predicted.size),
            "k_star": data.k_star,
            **self.scores,
            "clusters_found": int(np.unique(self.predicted).size),
            **clustering.details,
            "bytes_uploaded": int(clustering.bytes_uploaded),
            "bytes_downloaded": int(clustering.bytes_downloaded),
        }
