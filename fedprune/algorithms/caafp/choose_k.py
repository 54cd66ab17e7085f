"""The number of clusters K chosen from the data (``--clusters auto``): the largest mean
silhouette of the average-linkage cuts.

The rule, one server step on the signals the clustering pass already uploaded (each client's
one-epoch update of Eq. 3, or its label histogram; no extra communication):

1. D = the pairwise cosine distances of the clients' signals (Eq. 4,
   :func:`~fedprune.algorithms.caafp.clustering.cosine_distance_matrix`): the matrix the
   clustering itself uses.
2. For every K in 2..min(``max_clusters``, N - 1), N the number of clients: the
   average-linkage cut of D into K clusters
   (:func:`~fedprune.algorithms.caafp.clustering.cluster_distances`, exactly what
   ``--clusters K`` gives) and its mean silhouette over the N clients, from D
   (scikit-learn's ``silhouette_score`` with ``metric="precomputed"``).
3. K* = the K of the largest mean silhouette; a tie goes to the smaller K.
4. K = K* when its silhouette is at least :data:`MIN_SILHOUETTE`, else K = 1 (one cluster,
   no cut separates the clients well enough).

Interpretations:

* The silhouette of client i is (b - a) / max(a, b): a is its mean distance to the other
  members of its cluster, b the smallest mean distance to the members of another cluster. A
  client alone in its cluster scores 0 (Rousseeuw, 1987; scikit-learn's convention), so cuts
  that only split single clients off are not rewarded.
* The silhouette is defined for 2 <= K <= N - 1 only, so K = 1 is never scored: the
  threshold decides it. Choosing needs N >= 3 clients (:class:`~fedprune.errors.ConfigError`
  otherwise); ``max_clusters`` above N - 1 is clamped to N - 1 here (the pipeline refuses it
  before anything is made).
* The silhouette is computed in float64 from the same D (cast from the clustering's dtype).
* The threshold (:data:`MIN_SILHOUETTE`) was measured, not guessed: see its note.

References: P. J. Rousseeuw, "Silhouettes: a graphical aid to the interpretation and
validation of cluster analysis", J. Comput. Appl. Math. 20 (1987) 53-65.

Examples
--------
>>> import numpy as np
>>> groups = np.repeat(np.eye(3), 3, axis=0) + 0.01 * np.arange(9)[:, None]
>>> choose_clusters(groups, max_clusters=5).chosen
3
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
from sklearn.metrics import silhouette_score

from fedprune.algorithms.caafp.clustering import cluster_distances, cosine_distance_matrix
from fedprune.errors import ConfigError

MIN_SILHOUETTE = 0.2
"""Below this mean silhouette no cut is taken: K = 1.

Measured on real one-epoch updates from the initial model (``experiments/cluster_choice.py``,
seeds 0-4, UCI-HAR's 30 and WISDM's 36 clients; docs/caafp.md, "Choosing K from the data").
With nothing to find (every client's training windows dealt out at random from the pooled
data) the best silhouette was 0.059-0.179 (10 federations): 0.2 is the smallest one-decimal value
above all of them (0.1 would have split 4 of the 10). Clients keeping one of their classes
scored 0.72-0.83 (K = 6, the number of classes, in all 10 cases), two 0.33-0.49, three
0.200-0.412 (seeds 0-2; UCI-HAR's lowest sits on the threshold); the clients as they are
(all classes) 0.083-0.179 on UCI-HAR (K = 1 at every seed) and 0.117-0.313 on WISDM (K = 2
at 3 of 5 seeds). The label histograms are no use for this test: they scored 0.33-0.59 with
nothing to find (the silhouette compares distances with each other, and it does not see that
every histogram is close to every other), so with ``--cluster-signal labels`` the threshold
almost never keeps K = 1."""


@dataclasses.dataclass(frozen=True)
class ClusterChoice:
    """What :func:`choose_clusters` found: the mean silhouette of every K tried (K >= 2),
    the threshold it applied and the K chosen (1 when no silhouette reached the threshold)."""

    silhouettes: Mapping[int, float]
    min_silhouette: float
    chosen: int

    @property
    def best(self) -> int:
        """The K of the largest mean silhouette (the smaller K on a tie)."""
        return best_k(self.silhouettes)

    def record(self) -> dict:
        """The JSON form (``cluster_choice.json``): K -> silhouette with string keys."""
        return {
            "chosen": self.chosen,
            "min_silhouette": self.min_silhouette,
            "silhouette": {str(k): float(s) for k, s in sorted(self.silhouettes.items())},
        }

    def file_record(self, signal: str, max_clusters: int) -> dict:
        """``cluster_choice.json`` of a run: what was clustered (``signal``), how, the most
        clusters tried and :meth:`record`."""
        return {
            "signal": signal,
            "distance": "cosine",
            "linkage": "average",
            "max_clusters": max_clusters,
            **self.record(),
        }

    def to_arrays(self) -> list[np.ndarray]:
        """The checkpoint form: [K tried (int64), their mean silhouettes (float64),
        [threshold, K chosen] (float64)]."""
        tried = sorted(self.silhouettes)
        return [
            np.array(tried, np.int64),
            np.array([self.silhouettes[k] for k in tried], np.float64),
            np.array([self.min_silhouette, self.chosen], np.float64),
        ]

    @classmethod
    def from_arrays(cls, arrays: Sequence[np.ndarray]) -> ClusterChoice:
        """What :meth:`to_arrays` wrote."""
        tried, silhouettes, (threshold, chosen) = arrays
        return cls(
            dict(zip(np.asarray(tried).tolist(), np.asarray(silhouettes).tolist())),
            float(threshold),
            int(chosen),
        )


def silhouettes_by_k(distances: np.ndarray, max_clusters: int) -> dict[int, float]:
    """K -> mean silhouette of the average-linkage cut into K clusters of ``distances`` (an
    (N, N) distance matrix, zero diagonal), for K = 2..min(``max_clusters``, N - 1)."""
    n = len(distances)
    if n < 3:
        raise ConfigError(
            f"--clusters auto needs at least 3 clients (a silhouette needs 2 <= K <= N - 1), "
            f"got {n}"
        )
    if max_clusters < 2:
        raise ConfigError(f"--max-clusters must be an integer >= 2, got {max_clusters}")
    d = np.asarray(distances, dtype=np.float64)
    return {
        k: float(silhouette_score(d, cluster_distances(distances, k), metric="precomputed"))
        for k in range(2, min(max_clusters, n - 1) + 1)
    }


def best_k(silhouettes: Mapping[int, float]) -> int:
    """Step 3: the K of the largest mean silhouette; a tie goes to the smaller K.

    >>> best_k({2: 0.5, 3: 0.7, 4: 0.7})
    3
    """
    return max(sorted(silhouettes), key=lambda k: silhouettes[k])


def pick_k(silhouettes: Mapping[int, float], min_silhouette: float = MIN_SILHOUETTE) -> int:
    """Steps 3-4: :func:`best_k` when its silhouette is at least ``min_silhouette``, else 1.

    >>> pick_k({2: 0.8, 3: 0.4}, 0.5), pick_k({2: 0.08, 3: 0.05}, 0.1)
    (2, 1)
    """
    best = best_k(silhouettes)
    return best if silhouettes[best] >= min_silhouette else 1


def choose_clusters(
    signals: np.ndarray, max_clusters: int, min_silhouette: float = MIN_SILHOUETTE
) -> ClusterChoice:
    """The module's rule on ``signals`` (one row per client): the silhouette of every K tried
    and the K chosen; the assignment is then ``cluster_clients(signals, choice.chosen)``."""
    silhouettes = silhouettes_by_k(cosine_distance_matrix(signals), max_clusters)
    return ClusterChoice(silhouettes, min_silhouette, pick_k(silhouettes, min_silhouette))
