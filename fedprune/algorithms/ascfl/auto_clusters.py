"""``--clusters auto`` for CFL with a fixed K (``cfl-fixed``) and IFCA (``ifca``): K and the
first clusters chosen from the data, in one one-shot federated pass before round 1.

Both baselines need K given (the AS-CFL paper, §2: "static approaches like IFCA require the
number of clusters to be predefined"). With ``--clusters auto`` the run first makes CA-AFP's
clustering pass (CA-AFP, Section 3.1, Eq. 3-4) and the server chooses K by the rule of
:mod:`fedprune.algorithms.caafp.choose_k`, the one ``--clusters auto`` of the pipeline
methods uses:

1. every client (all N: ``--client-dropout`` applies to the training rounds only) downloads
   the initial model w0, trains one local epoch of the method's own local training (plain
   SGD at round 1's learning rate ``--lr``, batches of ``--batch-size``; the TFF computation
   of every round, :func:`fedprune.engine.per_client.build_update_round`, with one epoch and
   one model; shuffled as "round 0") and uploads its update Δw_i = w_i - w0 (Eq. 3),
   flattened over every trainable tensor. Interpretation: "as CA-AFP's clustering pass" is
   read as CA-AFP's *signal* (a one-epoch update from the shared model), made with the local
   training of the method being run, not with CA-AFP's Adam client: Adam at IFCA's SGD
   learning rate 0.1 moved the weights 75-110 times further, and on clients that differ only
   by their rotation (``--labels iid``, seed 0) its updates gave K = 1 (best silhouette
   0.09) where SGD's give K = 4, the rotation groups exactly (0.57; docs/ascfl.md, "Choosing
   K from the data");
2. the server computes the cosine distances of the updates (Eq. 4) and, for K = 2..min(
   ``--max-clusters``, N - 1), the mean silhouette of the average-linkage cut into K
   clusters; K = the K of the largest one, or 1 when it is below 0.2
   (:func:`~fedprune.algorithms.caafp.choose_k.choose_clusters`);
3. the first clusters are the average-linkage cut into that K
   (:func:`~fedprune.algorithms.caafp.clustering.cluster_clients`, what ``--clusters K``
   gives in the pipeline).

How the choice starts each method (interpretations; neither paper defines an automatic K
for these baselines):

* **IFCA** (Ghosh et al., "An Efficient Framework for Clustered Federated Learning",
  NeurIPS 2020, Algorithm 1): its K models start from K random initializations and, in
  every round, each client estimates its cluster as the model of lowest loss on its data
  (Algorithm 1's cluster-identity estimate, ``argmin_j F_i(θ_j)``), then trains that model.
  With ``auto`` the K models all start as w0, the model the pass started from, and in
  round 1 each client trains the model of its cluster in the cut **instead of** the
  lowest-loss pick (with K equal models every loss ties: the pick could not separate
  anyone); from round 2 on, IFCA's rule as always. Round 1's downlink is one model per
  client (nobody receives all K to compare them). K = 1: one model, FedAvg, as
  ``--clusters 1``.
* **CFL with a fixed K** (the AS-CFL paper's reading of its CFL baseline, §4.1: "cosine
  similarity for clustering with a fixed number of clusters"; :class:`.rules.CFLFixedRule`):
  the chosen K replaces ``--clusters`` in the spherical k-means of every round. The run
  starts with the cut as the clients' clusters and K copies of w0 as their models, so round
  1 trains exactly as from one model (every client starts from w0); the cut decides where a
  client absent from round 1 (``--client-dropout``) goes (it follows the members of its cut
  cluster) and is what round 1's stability compares with. The k-means of round 1 is then run
  on round 1's updates, as with a fixed K.

What the pass costs is counted in round 1's ``uplink_mb`` and ``downlink_mb``: N full
updates up and N models down (float32). What is recorded, as the pipeline records it:
``config.json`` keeps ``clusters: "auto"`` and ``max_clusters``; ``cluster_choice.json`` the
signal, distance, linkage, ``max_clusters``, threshold, the mean silhouette of every K tried
and the K chosen (:meth:`.ClusterChoice.file_record`); ``summary.json``
``clusters_chosen``. The choice is
part of the checkpoint (:class:`.compose.ClusterState`): a resumed run takes K from it and
never chooses again; a run interrupted before its first round finished has no checkpoint and
starts again, making the same pass (the same seed gives the same updates and K).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fedprune.algorithms.ascfl import server
from fedprune.algorithms.caafp.choose_k import ClusterChoice, choose_clusters
from fedprune.algorithms.caafp.clustering import cluster_clients
from fedprune.configs.ascfl import ClusteredImageConfig
from fedprune.data.rotated_partition import RotatedFederatedData
from fedprune.engine import per_client
from fedprune.models.spec import ModelSpec
from fedprune.runs import RunDir

PASS_ROUND = 0  # the shuffling stream of the pass: "round 0", before round 1


@dataclasses.dataclass(frozen=True)
class ChosenStart:
    """What the one-shot pass found: the choice (silhouette per K, threshold, K) and the
    first cluster of every client (the cut into the chosen K, per client id)."""

    choice: ClusterChoice
    cluster_of: np.ndarray

    @property
    def k(self) -> int:
        return self.choice.chosen

    def file_record(self, max_clusters: int) -> dict:
        """``cluster_choice.json``: the choice made on the clients' updates, K tried up to
        ``max_clusters`` (:meth:`.ClusterChoice.file_record`)."""
        return self.choice.file_record("update", max_clusters)


def pass_signals(
    config: ClusteredImageConfig, spec: ModelSpec, fed: RotatedFederatedData
) -> np.ndarray:
    """Step 1: every client's flattened one-epoch update from the initial model w0 of
    ``spec`` (Eq. 3), one row per client id, at round 1's learning rate."""
    w0 = [np.asarray(w) for w in spec.initial_weights().trainable]
    clients = list(fed.clients)
    got = per_client.run_update_round(
        per_client.build_update_round(spec, epochs=1, models=1),
        [w0],
        config.learning_rate,
        {c.client_id: 0 for c in clients},
        clients,
        PASS_ROUND,
        config.seed,
        config.batch_size,
    )
    return np.stack([server.flatten(u) for u in got.updates])


def choose_start(signals: np.ndarray, max_clusters: int) -> ChosenStart:
    """Steps 2-3 on ``signals`` (one row per client id): K by the largest mean silhouette
    (1 below the threshold) and the average-linkage cut into K.

    >>> groups = np.repeat(np.eye(3), 3, axis=0) + 0.01 * np.arange(9)[:, None]
    >>> start = choose_start(groups, max_clusters=5)
    >>> start.k, start.cluster_of.tolist()
    (3, [0, 0, 0, 1, 1, 1, 2, 2, 2])
    """
    choice = choose_clusters(signals, max_clusters)
    return ChosenStart(choice, cluster_clients(signals, choice.chosen))


def tried(max_clusters: int, num_clients: int) -> int:
    """How many K the rule scores: 2..min(``max_clusters``, N - 1)."""
    return min(max_clusters, num_clients - 1) - 1


def settle(
    config: ClusteredImageConfig, spec: ModelSpec, fed: RotatedFederatedData, run: RunDir
) -> ChosenStart:
    """The start of a ``--clusters auto`` run in ``run``: the choice its checkpoint holds (a
    resumed run never chooses again; the clusters then come from the checkpoint too), else
    the one-shot pass's (:func:`pass_signals`, :func:`choose_start`)."""
    checkpoint = run.load_checkpoint(config.rounds)
    if checkpoint is None:
        return choose_start(pass_signals(config, spec, fed), config.max_clusters)
    _done, arrays, _scalars = checkpoint
    scored = tried(config.max_clusters, config.num_clients)
    run.check_checkpoint_shapes(arrays, {"cluster_choice": [(scored,), (scored,), (2,)]})
    if "cluster_choice" not in arrays or "cluster_of" not in arrays:
        raise run.unusable_checkpoint("is damaged (it lacks the choice of K of --clusters auto)")
    choice = ClusterChoice.from_arrays(arrays["cluster_choice"])
    most = min(config.max_clusters, config.num_clients - 1)
    if not 1 <= choice.chosen <= most:
        raise run.unusable_checkpoint(
            f"does not fit this run (its chosen K = {choice.chosen} is not in 1..{most})"
        )
    return ChosenStart(choice, np.asarray(arrays["cluster_of"][0]))
