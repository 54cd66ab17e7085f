"""A run of AS-CFL or a baseline (CFL, CFL with a fixed K, IFCA; FedAvg = IFCA with K = 1)
on the shared round loop and run directory.

The federation (:mod:`.federation`) is
:func:`fedprune.data.rotated_partition.partition_rotated` of the official splits (or one the
caller gives); the method is the rule of the configuration's class (:func:`.rules.rule_of`),
run by the clustered round of :mod:`.compose`. Files in ``--out``:
``config.json``, ``metrics.csv`` (per round: learning rate, mean and pooled client test
accuracy, training loss, clusters, ARI against the rotation groups, Jaccard stability of
memberships, uplink/downlink MB, low-rank rank), ``checkpoint.npz`` while running,
``clusters.json`` (each client's final cluster), ``cluster_models.npz`` (each cluster's final
model) and ``summary.json`` (final and peak accuracy, rounds to 90 % of the peak, clusters,
ARI, stability, bytes, (ε, δ) when noise is on, wall time, and the ``clustered`` deploy
manifest with which ``edge-export`` gives each client its cluster's model). With
``--clusters auto`` (CFL with a fixed K, IFCA) a one-shot pass chooses K and the first
clusters before round 1 (:mod:`.auto_clusters`): ``cluster_choice.json`` records how, the
summary's ``clusters_chosen`` the K.
"""

from __future__ import annotations

from fedprune.algorithms.ascfl import compose, federation, metrics, rules
from fedprune.configs.ascfl import ClusteredImageConfig
from fedprune.data.rotated_partition import RotatedFederatedData
from fedprune.engine.compose import Inputs, RunPlan, write_clustering
from fedprune.engine.loop import RoundsResult
from fedprune.models.spec import ModelSpec
from fedprune.models.user import UserModel
from fedprune.runs import RunDir

# the federation's builders (:mod:`.federation`), importable from here too
build_federation, numbered = federation.build_federation, federation.numbered


def model_spec(
    config: ClusteredImageConfig, fed: RotatedFederatedData, model: str | UserModel | None = None
) -> ModelSpec:
    """``config.model`` (or ``model``, your own) on ``fed``'s images, with as many classes as
    its labels show (your images: as many as their class names)."""
    num_classes = int(max(max(c.y_train.max() for c in fed.clients), fed.proxy_y.max())) + 1
    num_classes = max(num_classes, len(fed.federated.class_names))
    chosen = config.model if model is None else model
    return ModelSpec(fed.federated.input_shape, num_classes, seed=config.seed, model=chosen)


class ClusteredImagesRun(RunPlan[ClusteredImageConfig], family=ClusteredImageConfig):
    """A run of a clustered image method for the composer (:mod:`fedprune.engine.compose`):
    the federation (given or built) with its clients counted (:func:`.federation.prepared`),
    the model; then the rule on the one-shot pass's start of ``--clusters auto``
    (:func:`.rules.started_rule`) and its rounds; then the clusters, the cluster models and
    the summary (:func:`.metrics.rounds_summary`). The checkpoint goes once the run is
    finished (the final state is in ``clusters.json`` and ``cluster_models.npz``).

    Its runner, :func:`run_clustered_images`, takes ``federation``: the clients to run on
    instead of :func:`~.federation.build_federation`'s (then ``data_dir`` is not read; the
    caller makes it match ``config``, whose recorded fields name it in ``config.json``);
    ``spec``: the model instead of :func:`model_spec`'s; ``model``: your own model
    (:mod:`fedprune.models.user`), as ``config.model`` names it (a run of your model
    records its architecture in ``model.json``)."""

    keeps_checkpoint, records_file = False, True
    takes = ("federation", "spec", "model")

    def __init__(self, config: ClusteredImageConfig, inputs: Inputs):
        super().__init__(config, inputs)
        given = inputs.get("federation")
        self.fed, self.ids = federation.prepared(config, given, inputs.data_dir)
        trained = inputs.model_of(config)
        self.spec = inputs.get("spec") or model_spec(config, self.fed, trained)
        if isinstance(trained, UserModel):  # checked before anything is written
            self.architecture = self.spec.keras()

    def start(self, run: RunDir) -> tuple[compose.ClusteredRounds, int]:
        rule, self.chosen = rules.started_rule(self.config, self.spec, self.fed, run)
        self.rounds = compose.ClusteredRounds(self.config, rule, self.fed, self.chosen)
        return self.rounds, self.config.rounds

    def summary(self, run: RunDir, result: RoundsResult[compose.ClusterState]) -> dict:
        """Each client's final cluster (by the client's own id) and each cluster's final
        model, what edge-export deploys to a client (the manifest); the summary of the
        rounds' metrics."""
        config, chosen, state = self.config, self.chosen, result.state
        choice = chosen and chosen.file_record(config.max_clusters)
        write_clustering(run, state.by_client_id(self.ids), dict(enumerate(state.models)), choice)
        rows = run.metrics_rows()
        return {
            **self.summary_head(federation.partition_record(config)),
            "rounds": result.rounds,
            **metrics.rounds_summary(rows, chosen and chosen.k, self.rounds.params),
            "deploy": federation.deploy_manifest(config, self.spec, self.fed),
            **metrics.lowrank_uplink(rows),
            **compose.privacy_record(config, result.rounds),
        }


run_clustered_images = ClusteredImagesRun.run
"""Run (or resume, or return the finished) run of ``config`` in ``out``; returns the summary:
``run_clustered_images(config, out, data_dir=None, progress=True, *, federation=None,
spec=None, model=None)``, the keywords as :class:`ClusteredImagesRun` says."""
