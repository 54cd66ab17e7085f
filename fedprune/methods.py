"""Every training method, by name, without importing TensorFlow: the method registry.

One :class:`Method` per method: its name (the ``fedprune train`` sub-command), a one-line
summary and a long description (``--help``), its configuration class
(:mod:`fedprune.configs`, whose fields become the command-line options) and its runner as a
``"module:function"`` string, imported only when a run starts. Every runner has the signature::

    runner(config, out, data_dir=None, progress=True) -> dict  # the run's summary

and trains, resumes or returns the finished run in ``out``.

Adding a method is one configuration class, one runner and one line in :data:`METHODS`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from fedprune.configs.ascfl import CFLConfig, CFLFixedConfig, ClusteredImageConfig, IFCAConfig
from fedprune.configs.clusterfl import ClusterFLConfig
from fedprune.configs.fedavg import FedAvgConfig
from fedprune.configs.fedcref import FedCRefRunConfig
from fedprune.configs.fedhire import FedHireConfig, FedKMeansConfig, KFedConfig
from fedprune.configs.fields import Config
from fedprune.configs.pipeline import (
    CAAFPConfig,
    EfficientFLConfig,
    FedCHARConfig,
    FedSNIPConfig,
    GlobalFTConfig,
)
from fedprune.errors import ConfigError
from fedprune.lazy import resolve


@dataclasses.dataclass(frozen=True)
class Method:
    """One method: ``runner`` is ``"module:function"``, imported by :meth:`run_function`."""

    name: str
    summary: str
    description: str
    config: type[Config]
    runner: str
    # methods that fine-tune personal models: "module:function" giving a finished run's
    # fine-tuning inputs, (run, data, model spec) -> ({client: start}, {client: kernel masks})
    finetune_start: str | None = None
    # which of your own data the method takes (the Python API and --dataset PATH.npz):
    # "windows" (fedprune.data.user), "images" (fedprune.data.user_images), "table"
    # (fedprune.data.tables), or "" (its built-in datasets only)
    data: str = ""
    # whether it trains your own Keras model (the Python API's model_fn): a classifier
    # model_fn(input_shape, num_classes), or for FedCRef an autoencoder model_fn(input_dim)
    takes_model: bool = False

    def run_function(self) -> Callable[..., dict]:
        """The runner (imports its module, and so TensorFlow, on first call)."""
        return resolve(self.runner)


_IMAGE_FILES = (
    "Writes config.json, metrics.csv (per round: accuracy, clusters, ARI against the rotation "
    "groups, stability, bytes), clusters.json, cluster_models.npz (each cluster's final "
    "model, for edge-export) and summary.json to --out; resumable."
)
_IMAGE_RUNNER = "fedprune.algorithms.ascfl.experiment:run_clustered_images"
_HAR_FILES = "Writes config.json, metrics.csv, checkpoint.npz and summary.json to --out."
_PIPELINE_FILES = (
    "config.json, metrics.csv (per round and cluster), clusters.json (and with --clusters "
    "auto cluster_choice.json), masks.npz, cluster_models.npz, personal_ft<E>.npz and "
    "summary.json in --out; resumable like every run."
)
_PIPELINE_RUNNER = "fedprune.algorithms.pipeline.compose:run_method"
_PIPELINE_START = "fedprune.algorithms.pipeline.compose:finetune_start"
_RESUMES = (
    " Re-running the same command resumes an interrupted run, and returns a finished one "
    "without recomputing it."
)

METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method(
            "fedavg",
            "plain FedAvg (CA-AFP Phase 1 only)",
            "Federated averaging on TFF; writes config.json, metrics.csv, checkpoint.npz and "
            "summary.json to --out." + _RESUMES,
            FedAvgConfig,
            "fedprune.algorithms.fedavg:run_fedavg",
            data="windows",
            takes_model=True,
        ),
        Method(
            "caafp",
            "CA-AFP: clustering, prune-and-heal, sparse fine-tuning",
            "Cluster-Aware Adaptive Federated Pruning (Algorithm 1 of the paper) on TFF. "
            + _PIPELINE_FILES,
            CAAFPConfig,
            _PIPELINE_RUNNER,
            _PIPELINE_START,
            data="windows",
            takes_model=True,
        ),
        Method(
            "global_ft",
            "CA-AFP with one cluster (the paper's Global-FT)",
            "CA-AFP with K = 1: prune-and-heal on one global model, then fine-tuning. "
            + _PIPELINE_FILES,
            GlobalFTConfig,
            _PIPELINE_RUNNER,
            _PIPELINE_START,
            data="windows",
            takes_model=True,
        ),
        Method(
            "fedchar",
            "FedCHAR baseline (dense, clustered, personalized)",
            "10 FedAvg warm-up rounds, cosine clustering into 3 groups, 40 rounds of per-group "
            "training with a proximal term, fine-tuning; no pruning. " + _PIPELINE_FILES,
            FedCHARConfig,
            _PIPELINE_RUNNER,
            _PIPELINE_START,
            data="windows",
            takes_model=True,
        ),
        Method(
            "efficientfl",
            "EfficientFL baseline (one early magnitude mask, 70 %)",
            "Magnitude pruning to 70 % after the first round, fixed mask afterwards, K = 1, "
            "fine-tuning. " + _PIPELINE_FILES,
            EfficientFLConfig,
            _PIPELINE_RUNNER,
            _PIPELINE_START,
            data="windows",
            takes_model=True,
        ),
        Method(
            "fedsnip",
            "FedSNIP baseline (one-shot SNIP mask, 70 %)",
            "SNIP connection sensitivity |E[g] * w0| from the clients' mean gradient at the "
            "initial weights, one fixed 70 % mask, K = 1, fine-tuning. " + _PIPELINE_FILES,
            FedSNIPConfig,
            _PIPELINE_RUNNER,
            _PIPELINE_START,
            data="windows",
            takes_model=True,
        ),
        Method(
            "clusterfl",
            "ClusterFL baseline (dense, clustered multi-task learning by ADMM)",
            "One model per client coupled by a learned cluster structure: local proximal "
            "steps on TFF, closed-form Omega step, spectral/k-means cluster step, dual step "
            "(fedprune/algorithms/clusterfl.py), then fine-tuning. Writes config.json, "
            "metrics.csv, clusters.json, personal_ft<E>.npz and summary.json; resumable.",
            ClusterFLConfig,
            "fedprune.algorithms.clusterfl:run_clusterfl",
            "fedprune.algorithms.clusterfl:finetune_start",
            data="windows",
            takes_model=True,
        ),
        Method(
            "fedcref",
            "FedCRef unsupervised federated clustering",
            "FedCRef (Nardi et al.): unsupervised federated clustering. Each of N clients "
            "holds K_i unlabeled classes (K_i uniform in [2, K_G/2]) with S images each and "
            "starts from a local clustering (dirty uniform with --dirtiness, or k-means on "
            "autoencoder codes); per-cluster autoencoders are exchanged, associated by "
            "reconstruction error (alpha, theta), grouped into communities trained with "
            "FedAvg on TFF, and used to refine every client's clusters until clients are "
            "stable (tau) or the community counts settle. Writes config.json, metrics.csv "
            "(per iteration), community_models.npz, assignments.npz and summary.json to "
            "--out; re-running resumes an interrupted run. Labels only build the system and "
            "evaluate it. Your own unlabeled vectors: --dataset table.npz (x in [0, 1], "
            "client_id, optional y for the scores) with --local-k.",
            FedCRefRunConfig,
            "fedprune.algorithms.fedcref.experiment:run_fedcref_experiment",
            data="table",
            takes_model=True,
        ),
        *(
            Method(
                name,
                summary,
                description + _IMAGE_FILES,
                config,
                _IMAGE_RUNNER,
                data="images",
                takes_model=True,
            )
            for name, summary, description, config in (
                (
                    "ascfl",
                    "AS-CFL: adaptive clustered FL without a preset K",
                    "AS-CFL on rotated, label-skewed image clients: every round, cosine "
                    "similarity of the updates (low-rank on the output layer), clusters grown "
                    "by the positive incentive on a proxy set, EM + split/merge by the "
                    "dispersion-to-separation ratio, (noisy) intra-cluster aggregation. ",
                    ClusteredImageConfig,
                ),
                (
                    "cfl",
                    "CFL baseline (Sattler et al.: recursive bipartition)",
                    "Clustered FL: a cluster is split in two by the cosine similarity of its "
                    "clients' updates when its mean update is small and some update is large. ",
                    CFLConfig,
                ),
                (
                    "cfl-fixed",
                    "CFL with a fixed number of clusters (AS-CFL's baseline)",
                    "Every round, spherical k-means with --clusters K on the updates. ",
                    CFLFixedConfig,
                ),
                (
                    "ifca",
                    "IFCA baseline (K models, lowest-loss choice; K = 1 is FedAvg)",
                    "Each client trains the model with the lowest loss on its data; each "
                    "model is averaged over the clients that chose it. ",
                    IFCAConfig,
                ),
            )
        ),
        Method(
            "fedhire",
            "Fed-HIRE: one-shot hierarchical federated clustering (UCI tables)",
            "Each client clusters its objects by competitive penalized learning (FCPL) and "
            "uploads the clusterlet centroids once (a TFF sum of fixed-shape slots); the server "
            "builds a hierarchy (MCPL levels), a data-enhanced representation and a weighted "
            "k-modes clustering into k*, and sends each client its clusterlet-to-cluster map. "
            "Writes config.json, metrics.csv, labels.npz and summary.json (Purity, ARI, NMI, "
            "ACC, levels, bytes, times) to --out.",
            FedHireConfig,
            "fedprune.algorithms.fedhire.experiment:run_fedhire",
            data="table",
        ),
        Method(
            "kfed",
            "k-FED baseline: one-shot federated k-means (UCI tables)",
            "Local k-means per client, one upload of the centres, server k-means of the "
            "centres into k*. Same files as fedhire.",
            KFedConfig,
            "fedprune.algorithms.fedhire.experiment:run_fedhire",
            data="table",
        ),
        Method(
            "fedkmeans",
            "federated k-means baseline: TFF's build_fed_kmeans, multi-round (UCI tables)",
            "Every round the clients assign their objects to the broadcast k* centroids and send "
            "per-centroid sums and counts; the server moves the centroids (TFF's federated "
            "k-means). Each object takes its nearest final centroid. Same files as fedhire.",
            FedKMeansConfig,
            "fedprune.algorithms.fedhire.experiment:run_fedhire",
            data="table",
        ),
    )
}


def method(name: str) -> Method:
    """The method named ``name``; an unknown name is a ConfigError listing the known ones."""
    if name not in METHODS:
        raise ConfigError(f"unknown method {name!r}; the known methods are {', '.join(METHODS)}")
    return METHODS[name]
