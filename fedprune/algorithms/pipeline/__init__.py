"""The clustered, masked federated pipeline shared by CA-AFP and its baselines.

Modules: :mod:`.state` (the server state and its checkpoint), :mod:`.phases` (each phase as
a function of the state), :mod:`.policy` (the mask-policy interface), :mod:`.scope` (which
kernels are pruned), :mod:`.recluster` (``--recluster split-merge``: AS-CFL's split/merge
of the clusters during Phases 2-3), :mod:`.policies` (each method's mask policy, by
configuration class), :mod:`.compose` (:func:`run_pipeline`: the phases on the shared round
loop, fine-tuning, the summary, as a family of :mod:`fedprune.engine.compose`). The
hyper-parameters are :class:`fedprune.configs.pipeline.PipelineConfig`.

Phases (CA-AFP's Algorithm 1 in general form; each algorithm module picks the lengths, the
number of clusters and a :class:`MaskPolicy`):

1. T0 rounds of data-size-weighted FedAvg (Eq. 2) over sampled clients.
2. Clustering when K > 1: every client trains one local epoch from w^(T0) and sends its
   update; cosine distances (Eq. 3-4), agglomerative clustering, average linkage.
3. T1 rounds of dense cluster training with the proximal objective (Eq. 5) towards the fixed
   reference w^(T0), data-size-weighted aggregation in the cluster (Eq. 6).
4. T2 rounds of masked cluster training (Eq. 7); after a scoring round the policy updates the
   cluster's mask from that round's federated statistics.
5. Fine-tuning: every client trains its cluster model under the fixed mask (Eq. 12).

Shared interpretations (all configurable):

* Sampling: Phase 1 samples ``clients_per_round`` clients from all. Phases 2-3 sample the same
  total, split across clusters in proportion to their sizes with at least one client per
  cluster (so every cluster trains, and every scheduled mask update happens, in every round;
  27/2/1 clients -> 8/1/1). This keeps the paper's 10 clients per round and its communication.
* The clusters of a round run as one TFF computation (clients pick their cluster's model and
  mask by index; the server aggregates per cluster): `fedprune.engine.clustered`.
* Phase 1 and the clustering step are rounds 1..T0 and T0 + 1 of the run (its checkpoint and
  ``metrics.csv``), Phases 2-3 rounds T0 + 2 .. T0 + 1 + T1 + T2.
* Statistics of a scoring round: gradients at the broadcast w_c ⊙ M_c before local training,
  the clients' trained models, and the aggregated cluster model; unweighted means over the
  cluster's participating clients (the model aggregation is data-size weighted).
* Prunable: conv and dense kernels; biases stay dense (:mod:`fedprune.sparsity.layers`).
  ``prune_layers`` (``--prune-layers``, our extension) names the layers whose kernels are
  pruned (default: all). The mask policy then sees only those kernels: the target sparsity,
  the schedule's counts, the ranking and Eq. 9's maximum are over them, and the other kernels
  stay dense. The summary's ``sparsity`` is, as before, over all conv and dense kernels
  (``prunable_params`` weights); ``sparsity_pruned_layers`` is over the chosen kernels
  (``pruned_params`` weights), ``layer_sparsity`` per cluster and kernel.
* A layerwise budget is refused for a chosen kernel that would have to lose whole output units
  (:func:`fedprune.sparsity.masks.starves_units`, e.g. the classifier with ``block=16``).
* Communication counts every transfer (Eq. 13 and encoded payload), by kind: models,
  clustering (download of w^(T0) and upload of the update, every client), statistics.
"""

from fedprune.algorithms.pipeline.compose import run_method, run_pipeline
from fedprune.algorithms.pipeline.policy import MaskPolicy, update_masks

__all__ = ["MaskPolicy", "run_method", "run_pipeline", "update_masks"]
