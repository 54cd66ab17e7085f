"""How each clustering method's centres become the run's assigner
(:class:`fedprune.runs.assigner.Assigner`: a new sample's centre by the lowest key, then that
centre's cluster).

* Fed-HIRE -- centres: the client's clusterlet centroids (FCPL); ``a``: their feature-cluster
  weights ``M`` (``m`` for the weighted norm, ``m²`` for the scaled one, Eq. 2); ``ln f``: the
  mean over the objects of FCPL's last epoch of the ``ln(γ_j w_j)`` each one met (Eq. 4;
  :class:`.cpl.CplResult`). The winner of Eq. 4 is
  ``argmax f_j s_j`` with ``s = exp(-d²/2)`` or ``1/(d + 1e-12)``: the same as the lowest key
  (taken in logarithms, so a far sample never underflows to a tie). The table is the
  downloaded clusterlet -> cluster map: the server's MCPL levels (Eq. 11), the data-enhanced
  representation (Eq. 12) and the weighted k-modes (Eq. 13-18) are computed once per
  clusterlet centroid on the server, and an object takes its clusterlet's cluster
  (:func:`.algorithm.client_labels`), so the map holds all of them for this client.
  Table 4's k-means clusterlets: nearest centroid (``a = 1``, ``f = 1``).
* k-FED -- centres: the client's local k-means centres; the table: the server's k-means
  cluster of each (an object's label is the cluster of its nearest local centre).
* Federated k-means -- centres: the final global centroids (the same for every client); the
  table: the identity.

What is not a function of the sample alone: FCPL assigns the objects of an epoch one after
the other, each meeting the ``γ w`` the previous ones left (Algorithm 1 lines 3-7), so the
factor an object of the run met depends on its place in the client's data. The assigner uses
one factor per clusterlet, the one the objects of the last epoch met on average (a
geometric mean; the epoch's start or end values agree less often); an object near a
boundary between two clusterlets of different clusters can land on the other one (measured
on the 10 UCI tables, authors' splits, and 7 of them with the paper partition, seed 0: 99.78
% to 100 % of each run's objects, per client 98.55 % to 100 %; ``docs/edge-export.md``).
k-FED and federated k-means are exact (k-means labels are the nearest centres), up to
float32.
"""

from __future__ import annotations

import numpy as np

from fedprune.algorithms.fedhire.algorithm import Clusterlets, FedHireParams
from fedprune.runs.assigner import Assigner, ClientAssigner

__all__ = ["fedhire_client", "nearest_centre"]


def fedhire_client(
    clusterlets: Clusterlets, assignment: np.ndarray, params: FedHireParams
) -> ClientAssigner:
    """A Fed-HIRE client's assigner: its clusterlets and the downloaded map ``assignment``
    (padded with -1 past its ``k`` clusterlets)."""
    k = clusterlets.centroids.shape[0]
    clusters = np.asarray(assignment[:k], dtype=np.int64)
    if clusterlets.log_factors is None or clusterlets.feature_weights is None:  # k-means
        return ClientAssigner(np.asarray(clusterlets.centroids, np.float64), clusters)
    m = np.asarray(clusterlets.feature_weights, dtype=np.float64)
    return ClientAssigner(
        np.asarray(clusterlets.centroids, np.float64),
        clusters,
        m if params.norm == "weighted" else m * m,
        np.asarray(clusterlets.log_factors, np.float64),
    )


def nearest_centre(
    method: str, k_star: int, centres: list[np.ndarray], clusters: list[np.ndarray]
) -> Assigner:
    """The assigner of the k-means methods: each client's ``centres`` and their ``clusters``."""
    return Assigner(
        method,
        "gaussian",
        k_star,
        [
            ClientAssigner(np.asarray(c, np.float64), np.asarray(m, np.int64))
            for c, m in zip(centres, clusters)
        ],
    )
