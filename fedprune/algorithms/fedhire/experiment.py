"""A run of the one-shot clustering family in a run directory: ``fedprune train
fedhire|kfed|fedkmeans``.

:func:`run_clustering` is the same for every method and takes the method as a clusterer
(:mod:`~fedprune.algorithms.fedhire.clusterers`): the table is read in its original format
(:mod:`fedprune.data.uci_tabular`) and split over the clients (``--partition
authors|paper``, :mod:`~fedprune.data.table_partition`), or given already split; the
clusterer labels every client's objects (Fed-HIRE: each client clusters its own objects by
FCPL, the centroids go up and the clusterlet-to-cluster map comes down as TFF computations,
and the server builds the hierarchy and the final clusters in between; Cai et al.,
"One-Shot Hierarchical Federated Clustering");
the labels are scored against the classes. :func:`run_fedhire` runs the clusterer registered
for its configuration's class (:meth:`~fedprune.configs.fedhire.FedHireConfig.clusterer`).
Labels enter only the paper partition (as the paper's) and the evaluation, never a
clusterer. Either is :class:`ClusteringRun` on the run composer
(:mod:`fedprune.engine.compose`), without rounds; the clients' objects and their labels are
:mod:`.client_objects`'.

Files: ``config.json``, ``metrics.csv`` (one row: the indices), ``labels.npz`` (each client's
predicted labels ``client<l>`` and row indices ``rows<l>``, ``l`` = 0 .. L-1 in client order)
and ``summary.json`` (method, dataset, partition, seed, clients, with your own table the
clients' own ids ``client_ids`` in that order (by which :meth:`fedprune.api.Result.assignments`
and ``edge-export`` name them), objects, k*; Purity, ARI, NMI, ACC; clusters found; what
the clusterer adds, for Fed-HIRE the clusterlets per client, ``k`` per level and the failed
server attempts; bytes up and down; CPU and wall seconds; the ``deploy`` manifest, kind
``assigner``) and ``assigner.npz`` (what labels a new sample of each client as the run
labelled its objects, with the table's encoding: :mod:`fedprune.runs.assigner`;
``edge-export`` makes it a TFLite file per client). One-shot: there is nothing to resume, so a
run either finished (its summary is returned) or is run again from the start.
"""

from __future__ import annotations

import os
import time

from fedprune.algorithms.fedhire.client_objects import ClientObjects
from fedprune.algorithms.fedhire.clusterers import Clusterer
from fedprune.configs.fedhire import FedHireConfig
from fedprune.configs.protocol import is_user_file
from fedprune.data.registry import tabular_recipe
from fedprune.data.table_partition import FederatedSplit
from fedprune.engine.compose import Inputs, RunPlan
from fedprune.runs import RunDir, names
from fedprune.runs.assigner import Assigner, normalization
from fedprune.runs.deploy import DeployManifest


class ClusteringRun(RunPlan[FedHireConfig], family=FedHireConfig):
    """A one-shot clustering run for the composer (:mod:`fedprune.engine.compose`): the
    table loaded and split (or given split, ``table``), its objects checked and ``k*``
    settled (:meth:`.client_objects.ClientObjects.of`); no rounds; the labels of the
    clusterer given (``clusterer``; default the one the configuration's class names), their
    scores, ``labels.npz``, the assigner and the summary
    (:class:`.client_objects.LabelledObjects`). CPU and wall seconds count from the loading
    on."""

    records_file = True
    takes = ("clusterer", "table")

    def __init__(self, config: FedHireConfig, inputs: Inputs):
        super().__init__(config, inputs)
        self.clusterer = inputs.get("clusterer") or config.clusterer()
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        self.objects = ClientObjects.of(config, inputs.get("table"), inputs.data_dir)

    def summary(self, run: RunDir, result: None) -> dict:
        config = self.config
        labelled = self.objects.clustered(self.clusterer, config.seed)
        assigner = labelled.write(run)
        deploy = {} if assigner is None else {"deploy": assigner_manifest(config, assigner)}
        return {
            **self.summary_head(
                {} if is_user_file(config.dataset) else {"partition": config.partition}
            ),
            **labelled.record(),
            "cpu_s": time.process_time() - self.cpu,
            "wall_s": time.perf_counter() - self.wall,
            **deploy,
        }


def run_clustering(
    config: FedHireConfig,
    clusterer: Clusterer,
    out: str | os.PathLike,
    data_dir: str | os.PathLike | None = None,
    progress: bool = True,
    *,
    table: FederatedSplit | None = None,
) -> dict:
    """Run ``clusterer`` (or return the finished run) in ``out``; returns the summary.

    ``config`` gives the data (``dataset``, ``partition``, ``num_clients``), ``k_star`` and
    ``seed``, and is what ``config.json`` records; the clusterer's own knobs come from it
    when it is built, not here.

    ``table`` -- the clients' objects, already loaded and split, as a
    :class:`~fedprune.data.table_partition.FederatedSplit`: ``rows``, one vector of
    row indices into ``x`` per client (every client needs at least 2 objects); ``x``, the
    table (n, d) of finite numbers, clustered as it is (the UCI tables are z-scored by
    :func:`.client_objects.load_federation`; a given table is not); ``y``, each row's class
    (ground truth for the scores only), or ``None``. ``FederatedSplit.from_clients`` builds
    one from one array per client. With ``table`` nothing is loaded: ``config.dataset``,
    ``partition`` and ``num_clients`` are only recorded, and ``k_star`` defaults to the number
    of distinct classes in ``y`` (it must be set when ``y`` is ``None``). ``config.json``
    records the configuration, not the table, so a finished run in ``out`` is returned as it
    is.

    Without classes (``y`` is ``None``) the run clusters as always and writes ``labels.npz``
    and ``summary.json`` without the four scores (``purity``, ``ari``, ``nmi``, ``acc``), and
    no ``metrics.csv`` (its row holds only the scores).
    """
    return ClusteringRun.run(config, out, data_dir, progress, clusterer=clusterer, table=table)


def assigner_manifest(config: FedHireConfig, assigner: Assigner) -> dict:
    """The ``deploy`` manifest of a clustering run (kind ``assigner``, as JSON): the
    assigner's file, one raw sample of the table's columns in, the cluster index out."""
    return DeployManifest(
        kind="assigner",
        models=names.ASSIGNER,
        model=config.method,
        input_shape=(assigner.features,),
        labels=None,
        normalization=normalization(assigner),
        data=tabular_recipe(config),
    ).to_json()


run_fedhire = ClusteringRun.run
"""Run (or return the finished) run of ``config`` in ``out``: Fed-HIRE, k-FED or federated
k-means, whichever clusterer ``config.clusterer()`` builds (``run_fedhire(config, out,
data_dir=None, progress=True, *, table=None)``; :func:`run_clustering` says what ``table``
must hold); returns the summary."""
