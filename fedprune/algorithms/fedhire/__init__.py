"""Fed-HIRE (Cai, Yang, Lu, Li, Ji, Zhang, Cheung, "One-Shot Hierarchical Federated
Clustering"): the algorithm core as numpy, one concept per
module. No TensorFlow here: :func:`.algorithm.upload_payload` and
:func:`.algorithm.server_step` are the seam where the one-shot upload becomes a TFF
computation.

* :mod:`.cpl` -- competitive penalized learning (Eq. 1-10, A.1-A.6, Algorithm 1).
* :mod:`.hierarchy` -- MCPL's level loop (§3.3, Eq. 11, Algorithm 2 lines 5-13).
* :mod:`.representation` -- the data-enhanced representation (Eq. 12).
* :mod:`.kmodes` -- weighted k-modes and failed attempts (Eq. 13-18, lines 17-25).
* :mod:`.algorithm` -- :func:`fed_hire`, the client / upload / server / labels pipeline.
* :mod:`fedprune.data.table_partition` -- ``--partition paper`` / ``authors`` and the z-score
  (§4.1; its names are re-exported here).
* :mod:`.metrics` -- Purity, ARI, NMI, ACC (§4.1).
* :mod:`.baselines` -- k-FED, pooled k-means (Table 3), ablations via flags (Table 4).
* :mod:`.assigner` -- how Fed-HIRE's and k-means' centres become the run's assigner
  (:mod:`fedprune.runs.assigner`, ``assigner.npz``; ``edge-export`` makes it a TFLite file
  per client).

The runs (these import TensorFlow, so the package does not import them):

* :mod:`.federated` -- the one-shot upload and the download as TFF computations.
* :mod:`.fedkmeans` -- multi-round federated k-means on TFF (the iterative baseline).
* :mod:`.clusterers` -- Fed-HIRE, k-FED and federated k-means as clusterers, one class each,
  each built from its own configuration (:mod:`fedprune.configs.fedhire`).
* :mod:`.client_objects` -- a run's clients' objects (the table loaded and split, or taken
  split, checked, ``k*`` settled) and a clusterer's labels of them: scores, files, summary.
* :mod:`.experiment` -- the runner shared by all clusterers: load and split the table (or
  take it split), cluster, score, write the run directory.

Every reading (sentence -> choice; the module docstrings give details):

1. "s(x_i, C_j) = ||m_j · (x_i - c_j)||_2" with "v = argmax [γ_j w_j s]" (Eq. 2, 4): a norm
   maximised would pick the farthest cluster; ``s`` is a similarity of the weighted distance
   d: ``exp(-d²/2)`` (default, the kernel of Eq. A.5) or ``1/d`` (``similarity="inverse"``).
2. "W_r = W_r - η s_r / s_v" (Eq. 9): ratio of similarities (default) or of Eq. 2's distances
   taken literally (``penalty="distance"``) or of the Eq. 4 / 7 scores ``γ w s``
   (``penalty="score"``).
2b. "||m_j · (x_i - c_j)||_2" (Eq. 2) and "||u_j · ¬(x_i ⊕ c_j)||_2" (Eq. 14): the norm
   weighted by the weights (``norm="weighted"``, default: ``sqrt(Σ m (x - c)²)``) or the
   difference scaled by them (``norm="scaled"``: ``sqrt(Σ m² (x - c)²)``, ~√D times shorter,
   so every Gaussian similarity is near 1 and one CPL run eliminates almost everything).
3. "γ_j = 1 - g_j / Σ g_t", "g_j records the winning times ... within learning iterations"
   (Eq. 5-6): cumulative over a CPL run, γ = 1 before any win.
4. "w_j = 1/(1 + e^{-10(W_j + 5)})" and "W ... set to w_j = 1" (Eq. 10, A.2): the exponent
   read as ``-10 W + 5`` with W starting at 1 (``weight="shifted"``, default: w = 0.993 at the
   start and moves from the first penalties), or literally with W starting at 0
   (``weight="paper"``: w stays ~1 until ~80 net penalties, so no assignment can change
   through it before the literal stop of line 8 ends the run).
5. "for i = 1 to n ... update clusterlet weights" (Algorithm 1 lines 3-7): sequential per
   object in index order (default), a fully vectorized ``update="batch"`` as option.
6. Centroids (not stated): the mean of each clusterlet's objects after every epoch.
7. "After all assignments, M is updated using Eqs. (A.1)-(A.6)" (A.2): variances with
   |C|-1 (0 below 2 objects), point-mass Hellinger for zero variances; Eq. A.5 literally
   (sqrt of the sum, ``beta="sqrt"``) or as a mean (``beta="mean"``).
8. "Once the weight of a clusterlet approaches zero, it becomes inactive" (A.2): eliminated
   at the end of an epoch when w < 0.01 (W < -5.46); the last cluster never.
9. "if Q_new = Q_old then convergence" (Algorithm 1 line 8): ``stop="assignments"`` (default)
   is line 8 literally, an epoch that changes no assignment and eliminates nothing; with the
   shifted weights of 4 the competition moves assignments until the clusters settle.
   ``stop="settled"`` also continues while an active cluster lost weight in the epoch (needed
   with the literal weights of 4, where line 8 alone stops before any W nears elimination);
   ``max_epochs`` = 300 bounds both.
   Readings 2b, 4 and 9 decide Table 3 (docs/fedhire.md: 36 of 40 cells within the
   yardstick with the defaults, far fewer with the literal ones).
10. "k0 = 0.5 n^(l) for FCPL and k0 = 0.5 n^(s) for MCPL" (§4.1): k0 = ceil(ratio · n),
    ratio in (0, 1]; initial centroids are k0 distinct random objects.
11. "each round initialized by inheriting the cluster number ... resetting ... γ_j ... and W"
    (§3.3, Remark 3): each MCPL level is a fresh CPL run from k_{δ-1} random points.
12. "if k_old = k_new then convergence else H = H ∪ {(k_new, Q_new)}" (Algorithm 2): the first
    level whose k does not fall ends the loop and is not kept; level 1 always kept; k = 1 ends it.
13. "x_iδ = Σ_j j q_ij" (Eq. 12): the 1-based cluster code per level, compared by equality.
14. Eq. 14-18: matching similarity ``sqrt(Σ u² [x = c])``, modes updated per feature (not
    stated), α of Eq. 15 literally (no square roots; ``hellinger="sqrt"`` is the true
    Hellinger), β = Σ_t p_t², initial modes k* distinct random rows.
15. Failed runs: X^(s) with fewer distinct rows than k* or an emptied k-modes cluster; the
    server re-runs MCPL + k-modes (the one-shot upload is not repeated), at most 10 attempts,
    failed ones counted and returned.
16. "uploads only the clusterlet centroids" (§3.2): upload = k^(l) x d float32 (padded with a
    mask for a fixed shape); download = one cluster id per clusterlet; 4 bytes per value.
17. Table 4's "substitution with a conventional k-means": client k-means with local_k
    (default k*), server k-means of the centroids into k* (no hierarchy); ``client_method``
    and ``server_method`` pick the step from ``algorithm.CLIENT_STEPS`` / ``SERVER_ATTEMPTS``.
18. "k-means ... applied to each global cluster to generate several clusterlets ... randomly
    allocated" (§4.1): 4 clusterlets per class (not stated), uniform random clients, redrawn
    until every client has >= 2 objects; L = 8.
19. Authors' splits (:mod:`fedprune.data.table_partition`): z-score with the population std of
    the whole dataset (both partitions), Statlog Vehicle's row 752 dropped, duplicates kept.
20. "NMI (Strehl and Ghosh, 2002)": geometric normalisation; ACC by the Hungarian map.
"""

from fedprune.algorithms.fedhire.algorithm import (
    Clusterlets,
    FedHireParams,
    FedHireResult,
    Payload,
    ServerResult,
    client_labels,
    client_step,
    fed_hire,
    server_step,
    upload_payload,
)
from fedprune.algorithms.fedhire.baselines import BaselineResult, kfed, pooled_kmeans
from fedprune.algorithms.fedhire.metrics import accuracy, ari, evaluate, nmi, purity
from fedprune.data.table_partition import (
    FederatedSplit,
    author_rows,
    make_split,
    paper_partition,
    zscore_population,
)

__all__ = [
    "BaselineResult",
    "Clusterlets",
    "FedHireParams",
    "FedHireResult",
    "FederatedSplit",
    "Payload",
    "ServerResult",
    "accuracy",
    "ari",
    "author_rows",
    "client_labels",
    "client_step",
    "evaluate",
    "fed_hire",
    "kfed",
    "make_split",
    "nmi",
    "paper_partition",
    "pooled_kmeans",
    "purity",
    "server_step",
    "upload_payload",
    "zscore_population",
]
