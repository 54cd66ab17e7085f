"""The clusterers of the one-shot clustering family: Fed-HIRE (Cai, Yang, Lu, Li, Ji, Zhang,
Cheung, "One-Shot Hierarchical Federated Clustering", Algorithm 2) and the two baselines beside
it, k-FED and multi-round federated k-means.

A clusterer takes each client's objects (one (n_l, d) float64 array per client, as
:func:`.algorithm.check_client_data` returns them), the number of clusters ``k*`` and the
run's seed, and returns each client's labels and the bytes its protocol moved
(:class:`Clustering`). It never sees the classes. Each one is built from its own configuration
by ``from_config``, registered against that configuration's class (:data:`CLUSTERER_CLASSES`;
:meth:`fedprune.configs.fedhire.FedHireConfig.clusterer` builds the one registered),
and :func:`.experiment.run_clustering` runs any of them: loading and splitting the table,
scoring and the run directory's files are the same for all three.

* :class:`FedHire` -- Algorithm 2 with the one-shot upload and the download as TFF
  computations (:mod:`.federated`). The client step is ``client_method``'s entry of
  :data:`.algorithm.CLIENT_STEPS` (FCPL, or Table 4's k-means), the server attempt
  ``server_method``'s entry of :data:`.algorithm.SERVER_ATTEMPTS` (MCPL + ``X^(s)`` + weighted
  k-modes, or Table 4's k-means). Randomness as :func:`.algorithm.fed_hire`: one
  ``SeedSequence(seed)`` child per client and one for the server, so the in-process
  :func:`~.algorithm.fed_hire` gives the same labels. Bytes: the paper's protocol ("uploads
  only the clusterlet centroids", §3.2), ``4 d Σ k^(l)`` up and one int32 cluster id per
  clusterlet, ``4 Σ k^(l)``, down; the padding of the TFF slots is not counted. The summary
  adds each client's number of clusterlets, ``k`` per kept hierarchy level (empty without
  MCPL), and the failed server attempts with their reasons.
* :class:`KFed` -- k-FED (Dennis et al., 2021), :func:`.baselines.kfed`: local k-means,
  one upload of the centres, server k-means of the centres into ``k*``.
* :class:`FedKMeans` -- ``rounds`` rounds of TFF's federated k-means,
  :func:`.fedkmeans.fed_kmeans` (its docstring has the readings).
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import numpy as np

from fedprune.algorithms.fedhire import baselines, federated, fedkmeans
from fedprune.algorithms.fedhire.algorithm import (
    FedHireParams,
    client_labels,
    client_step,
    server_step,
    upload_payload,
)
from fedprune.algorithms.fedhire.assigner import fedhire_client, nearest_centre
from fedprune.configs.fedhire import CLUSTERERS, FedHireConfig, FedKMeansConfig, KFedConfig
from fedprune.runs.assigner import Assigner


@dataclasses.dataclass(frozen=True)
class Clustering:
    """A clusterer's result: ``labels`` per client, (n_l,) int64 in ``0..k*-1``; the bytes
    uploaded and downloaded by all clients together (4 per float32 / int32 value);
    ``details``: the summary entries of this clusterer alone (JSON values), written after
    ``clusters_found``; ``assigner``: what labels a new sample of each client as this
    clustering labelled its objects (:mod:`.assigner`; the encoding is added by the run),
    ``None`` if the clusterer keeps none."""

    labels: list[np.ndarray]
    bytes_uploaded: int
    bytes_downloaded: int
    details: dict = dataclasses.field(default_factory=dict)
    assigner: Assigner | None = None


class Clusterer(Protocol):
    """One method of the family: clusters the clients' objects into ``k_star`` clusters."""

    def cluster(self, client_x: list[np.ndarray], k_star: int, seed: int) -> Clustering:
        """Each client's labels for its objects ``client_x`` (checked float64 arrays, one
        per client, all with the same features); the same ``seed`` gives the same labels."""


@dataclasses.dataclass(frozen=True)
class FedHire:
    """Fed-HIRE (Algorithm 2) with every knob of :class:`.algorithm.FedHireParams`."""

    params: FedHireParams = dataclasses.field(default_factory=FedHireParams)

    @classmethod
    def from_config(cls, config: FedHireConfig) -> FedHire:
        return cls(
            FedHireParams(
                eta=config.eta,
                k0_ratio=config.k0_ratio,
                client_method=config.client_method,
                server_method=config.server_method,
            )
        )

    def cluster(self, client_x: list[np.ndarray], k_star: int, seed: int) -> Clustering:
        children = np.random.SeedSequence(seed).spawn(len(client_x) + 1)
        local = [
            client_step(x, np.random.default_rng(child), self.params, k_star)
            for x, child in zip(client_x, children[:-1])
        ]
        width = max(c.centroids.shape[0] for c in local)
        received = federated.upload_all([upload_payload(c, width) for c in local])
        server = server_step(received, k_star, np.random.default_rng(children[-1]), self.params)
        rows = federated.download_all(server.assignments)
        ks = [c.centroids.shape[0] for c in local]
        assigner = Assigner(
            "fedhire",
            self.params.similarity,
            k_star,
            [fedhire_client(c, row, self.params) for c, row in zip(local, rows)],
        )
        return Clustering(
            [client_labels(c, row) for c, row in zip(local, rows)],
            bytes_uploaded=4 * client_x[0].shape[1] * sum(ks),
            bytes_downloaded=4 * sum(ks),
            details={
                "clusterlets": ks,
                "level_ks": list(server.hierarchy.ks) if server.hierarchy else [],
                "failed_attempts": server.failed_attempts,
                "failures": server.failures,
            },
            assigner=assigner,
        )


@dataclasses.dataclass(frozen=True)
class KFed:
    """k-FED with ``local_k`` centres per client (default ``k*``, capped at its size)."""

    local_k: int | None = None

    @classmethod
    def from_config(cls, config: KFedConfig) -> KFed:
        return cls()

    def cluster(self, client_x: list[np.ndarray], k_star: int, seed: int) -> Clustering:
        result = baselines.kfed(client_x, k_star, seed, self.local_k)
        return _k_means_clustering("kfed", k_star, result)


@dataclasses.dataclass(frozen=True)
class FedKMeans:
    """TFF's federated k-means for ``rounds`` rounds."""

    rounds: int = 20

    @classmethod
    def from_config(cls, config: FedKMeansConfig) -> FedKMeans:
        return cls(config.rounds)

    def cluster(self, client_x: list[np.ndarray], k_star: int, seed: int) -> Clustering:
        result = fedkmeans.fed_kmeans(client_x, k_star, seed, self.rounds)
        return _k_means_clustering("fedkmeans", k_star, result)


def _k_means_clustering(method: str, k_star: int, result: baselines.BaselineResult) -> Clustering:
    """The clustering of a k-means method, with its nearest-centre assigner."""
    return Clustering(
        list(result.labels),
        result.bytes_uploaded,
        result.bytes_downloaded,
        assigner=nearest_centre(method, k_star, result.centres, result.centre_clusters),
    )


# Each method's clusterer by its configuration class (the table of fedprune.configs.fedhire)
CLUSTERER_CLASSES: dict[type, type] = {
    FedHireConfig: FedHire,
    KFedConfig: KFed,
    FedKMeansConfig: FedKMeans,
}
for _config_class, _clusterer in CLUSTERER_CLASSES.items():
    CLUSTERERS.register(_config_class, _clusterer)
