"""AS-CFL (Yang, Wang et al., "Enhancing Clustered Federated Learning with Adaptive
Similarity", 2025): the server-side math as pure numpy / scipy / scikit-learn functions, one
concept per module; the round loop wires these in.

* :mod:`.similarity` -- cosine similarity of updates, full and low-rank (3.2.1-3.2.2).
* :mod:`.incentive` -- positive-incentive greedy clustering from representative seeds
  (3.2.1-3.2.2, Algorithm 1 line 16).
* :mod:`.split_merge` -- EM refinement and split/merge by ``G_k`` (3.3, lines 17-24).
* :mod:`.noisy_aggregation` -- weighted, clipped, noisy intra-cluster averaging and its
  (ε, δ) (3.4, lines 25-36).
* :mod:`fedprune.privacy.dp_mean` (shared) -- the noisy averaging of a run as TFF's DP
  aggregator (``DifferentiallyPrivateFactory.gaussian_fixed``).
* :mod:`.cfl` -- the CFL baselines (Sattler et al.'s bipartition; fixed K) (4.1).
* :mod:`.metrics` -- ARI, Jaccard stability, rounds to 90% of peak accuracy (4.1, 4.4.2).

The methods are composed from these: :mod:`.server` -- the server's steps of a round
(aggregation within a cluster, the similarity space, Stage 1, CFL's split pass);
:mod:`.rules` -- each method (AS-CFL, CFL, CFL with a fixed K, IFCA, FedAvg) as a rule built
from its configuration class; :mod:`.compose` -- the clustered round, the same for every
rule, on the shared round loop; :mod:`.auto_clusters` -- ``--clusters auto`` of CFL with a
fixed K and IFCA (K and the first clusters from a one-shot pass, by CA-AFP's silhouette
rule); :mod:`.federation` -- a run's clients (built or given, numbered, counted);
:mod:`.experiment` -- a run (data, model, rule).

The plain-text copy of the paper lost every equation body; each reading below is the
sentence it reads, then the choice (the module docstrings give details and options):

1. "the cosine similarity of their model updates" (3.2.1): cosine of each client's update
   flattened over all layers.
2. "This factorization is applied to a subset of model parameters, specifically weights near
   the output layer" (3.2.2): truncated SVD of the clients x update matrix of those weights;
   the similarity is the cosine of the projections on the kept components. Which weights
   are "near the output layer" is an option, ``--low-rank-layers``: ``output`` (the output
   layer's kernel and bias; the literal reading) or ``dense_head`` (every Dense layer after
   the convolutions; "weights", plural, and "near" admit it; the default). On real α = 0.4
   updates the output layer alone does not separate the rotation groups (ARI of average
   linkage ≤ 0.01 at rounds 1-5), the dense head does at round 5 (0.86; the full update 1.00):
   ``experiments/ascfl_admission_probe.py --alpha 0.4 --similarity-only``.
3. "The rank, r, is selected based on an explained-variance ratio ≥ 95% on the output-layer
   weights" (3.2.2): smallest r with uncentered energy ratio >= δ, default δ = 0.95.
4. "return low-rank compressed updates" (3.5) vs "low-rank factorization is on the
   similarity matrix ... on the server side" (2.3): uplink counted under ``full``,
   ``shared_basis`` (r coefficients replace the output kernel) or ``client_factors``
   (rank-r factors of the kernel update).
5. "the search stops at the first client that fails to improve accuracy by 3%" (3.2.1):
   ``absolute_gain`` admits when accuracy rises by >= 0.03 absolute (the paper's "%" are
   points: "this tiny 0.6% accuracy gain" is 0.915 -> 0.921); ``relative_gain`` is an
   option. The default is ``retained_ratio`` of #6 (below).
6. "The positive incentive threshold θ ... determines whether a client is admitted ... based
   on its performance contribution" (4.4.2), θ = 0.85: options ``accuracy_floor`` (accuracy
   >= θ and improves), ``similarity_gate`` (mean cosine to members >= θ and improves) and
   ``retained_ratio`` (accuracy with the client >= θ x accuracy without it).
7. "only the top 20% most similar clients are evaluated" (3.2.1): ceil(0.2 N) unassigned
   clients most similar to the seed (N = all clients; option: the unassigned ones).
8. "it is expanded with the greedy incentive test until no more positives are found"
   (3.2.2) vs "stops at the first client that fails" (3.2.1): stop at the first failure;
   option: try every candidate once.
9. "a representativeness score ... (data-size weighted centrality)" (3.2.2): own data size
   times mean (1 + cos) / 2 to the other unassigned clients; option: neighbours' sizes.
10. "The temporary aggregate model is created using a single weighted average" (3.2.1): the
    caller's ``evaluate(member_ids)`` builds and scores it.
11. "clients are reassigned to clusters on the basis of the shortest distance to cluster
    centers" / "typically within 5-10 iterations" (3.3): Euclidean E-step, data-size
    weighted M-step, at most 10 iterations, empty clusters dropped.
12. "the average Euclidean distance between the model updates of clients in the cluster and
    their centroid" / "the Euclidean distance from the cluster's centroid to the nearest
    other cluster's centroid" (3.3): G_k = D_k / S_k; option: on unit vectors.
13. "cluster k will be split into smaller sub-clusters" (3.3): two-way split, 2-means seeded
    by the two farthest members; option: minimum cross-similarity bipartition.
14. "it may be merged with a nearby similar cluster" (3.3): with the nearest-centroid
    cluster, merge candidates in increasing G, one operation per cluster per pass.
15. "if the value of G_k falls below a predefined merging threshold (α = 0.2)" (3.3): a
    singleton's G is 0, so singletons are kept apart by default (option: merge them).
16. (no sentence; oscillation guards) a merge needs the union's G <= β (so never leaves a
    single cluster, whose G is undefined) and must not reunite the halves of the previous
    pass's split; β > α is required. Option ``split_guard="halves"``: a split needs both
    halves' G <= β (the halves of a group of like clients, whose G grew with the SGD noise of
    converging models, sit close together, have G > β themselves, and could never merge back).
17. "The weight for each client is proportional to the size of its local dataset" (3.4):
    p_i = n_i / sum n_j.
18. "The differential privacy parameters are set to ε and δ, with the noise scale, σ
    calculated accordingly" (4.1): updates are clipped to a bound C the caller chooses
    (the paper gives none); σ = z x sensitivity, z from the RDP accountant.
19. "injects calibrated Gaussian noise to each client's update vector before aggregating
    them" (3.5): option ``client``; default ``aggregate`` adds N(0, (z C max p_i)²) to the
    average (z C / |cluster| for equal weights).
20. Algorithm 1 lines 15-16 run before the noise of line 27: the (ε, δ) covers the released
    cluster models, not the cluster memberships.
21. "the CFL approach, which uses cosine similarity for clustering with a fixed number of
    clusters" (4.1): spherical k-means baseline; Sattler's recursive split uses the norm of
    the weighted mean update < ε1, max norm > ε2, and the min-max cross-similarity
    bipartition (exact by single linkage; option: complete linkage as Sattler's code).
22. "the average Jaccard similarity of cluster memberships between consecutive communication
    rounds" (4.4.2): per client, Jaccard of its cluster's member sets, averaged.
23. "the number of rounds required to reach 90% peak accuracy" (4.1): first round with
    accuracy >= 0.9 x the run's maximum.
24. "an adaptive number of local steps, calculated as the ceiling of the batch size divided
    by the local data size" (3.5) and "a minimum of 10 local epochs is enforced" (3.2.3):
    E_i = max(E, ceil(BS / n_i)) epochs, E = ``--local-epochs`` (10 at ``--scale paper``);
    only a client with fewer examples than a batch trains more than E (``--epochs-rule``;
    ``rules.local_epochs``).
25. Stage 1 is "initial greedy clustering ... to form initial clusters" inside the round
    loop (Algorithm 1 line 16): once, Stage 2 then adjusting the clusters the clients
    trained in (the default, ``--stage1 first_round``), or every round
    (``every_round``; ``rules``' module text).
26. (no sentence; a departure, default W = 5) ``--warmup-rounds W``: rounds 1..W are
    FedAvg on one model and Stage 1 first runs in round W + 1 (with ``--stage1
    first_round``: only then). Measured reason (``experiments/ascfl_admission_probe.py
    --alpha 0.4``): on MNIST with Dirichlet(0.4) labels, round 1's updates from the shared
    initial model separate the rotation groups only weakly (full-update cosine within
    +0.23, between +0.14; average linkage ARI 0.38), while after 5 FedAvg rounds they do
    (+0.39 / −0.01, ARI 1.00). CFL waits for a stationary point for the same reason;
    FedCHAR warms up 10 rounds.

Defaults. Algorithm 1 read literally (``--admission absolute_gain --em-space raw
--stage1 every_round --update-reference start --merge-guard settled --warmup-rounds 0
--low-rank-layers output``, ``configs.ascfl.ALGORITHM_1_LITERAL``)
re-forms the clusters every round and never finds the rotation groups: MNIST α = 0.4, seed
0, 87.45 % against CFL's 96.89 %, ARI 0.03. The defaults are the readings under which the
clusters follow the rotations: ``retained_ratio`` admission (#6), EM and G_k on unit
vectors (#12), Stage 1 once (#25) after a 5-round FedAvg warm-up (#26), updates from the
clients' common mean model, the compact merge guard (#16), and the dense head factorized
(#2). Measured per seed and against the literal reading in ``docs/ascfl.md``.
"""

from fedprune.algorithms.ascfl.cfl import (
    CflSplit,
    SplitCriterion,
    cfl_split,
    fixed_k_clusters,
    max_cross_similarity,
    optimal_bipartition,
    split_criterion,
)
from fedprune.algorithms.ascfl.incentive import (
    GrownCluster,
    IncentiveClustering,
    Trial,
    admits,
    candidate_count,
    grow_cluster,
    incentive_clustering,
    most_similar,
    representativeness,
)
from fedprune.algorithms.ascfl.metrics import (
    adjusted_rand_index,
    membership_jaccard,
    rounds_to_accuracy,
    rounds_to_fraction_of_peak,
    run_stability,
)
from fedprune.algorithms.ascfl.noisy_aggregation import (
    NoisyAggregate,
    aggregate_cluster,
    clip_updates,
    noise_std,
)
from fedprune.algorithms.ascfl.similarity import (
    LowRankSimilarity,
    cosine_similarity_matrix,
    low_rank_similarity,
    rank_for_explained_variance,
    uplink_floats,
    uplink_saving,
)
from fedprune.algorithms.ascfl.split_merge import (
    Adjustment,
    ClusterGeometry,
    EmResult,
    adjust_clusters,
    bipartition,
    check_thresholds,
    cluster_centers,
    dispersion_separation,
    dynamic_adjustment,
    em_refine,
)
from fedprune.privacy.accounting import PrivacySpent, noise_multiplier_for, privacy_spent

__all__ = [
    "Adjustment",
    "CflSplit",
    "ClusterGeometry",
    "EmResult",
    "GrownCluster",
    "IncentiveClustering",
    "LowRankSimilarity",
    "NoisyAggregate",
    "PrivacySpent",
    "SplitCriterion",
    "Trial",
    "adjust_clusters",
    "adjusted_rand_index",
    "admits",
    "aggregate_cluster",
    "bipartition",
    "candidate_count",
    "cfl_split",
    "check_thresholds",
    "clip_updates",
    "cluster_centers",
    "cosine_similarity_matrix",
    "dispersion_separation",
    "dynamic_adjustment",
    "em_refine",
    "fixed_k_clusters",
    "grow_cluster",
    "incentive_clustering",
    "low_rank_similarity",
    "max_cross_similarity",
    "membership_jaccard",
    "most_similar",
    "noise_multiplier_for",
    "noise_std",
    "optimal_bipartition",
    "privacy_spent",
    "rank_for_explained_variance",
    "representativeness",
    "rounds_to_accuracy",
    "rounds_to_fraction_of_peak",
    "run_stability",
    "split_criterion",
    "uplink_floats",
    "uplink_saving",
]
