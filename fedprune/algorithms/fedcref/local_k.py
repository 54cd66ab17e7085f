"""Each client's number of local clusters K_i chosen from its own data (``--local-k auto``).

FedCRef takes K_i as given: "Clients could estimate K_i autonomously using clustering
evaluation metrics such as the silhouette coefficient. However, for simplicity, we assume
K_i is provided to the client in our experiments" (paper Sec. 5.2, "Number of Data
Distributions per Client"; Sec. 3: "Both local and global K are to be estimated"). This
module is that estimate, with the silhouette rule CA-AFP's ``--clusters auto`` uses
(:mod:`fedprune.algorithms.caafp.choose_k`), applied by every client to the candidate
clusterings of FedCRef's own local step (Algorithm 1 line 3, the initial clustering Q_i):

1. The client fits the autoencoder to all its samples and takes their codes, exactly as
   ``--init kmeans-ae`` does (:func:`~fedprune.algorithms.fedcref.initial.embedding_codes`,
   same seed).
2. For every K in 2..``max_local_k``: k-means of the codes into K clusters
   (:func:`~fedprune.algorithms.fedcref.initial.kmeans_labels`, 10 restarts, the same seed:
   the clustering ``--init kmeans-ae`` with K_i = K gives) and its mean silhouette over the
   client's samples, Euclidean distances between codes (scikit-learn's
   ``silhouette_score``).
3. K_i = the K of the largest mean silhouette, a tie to the smaller K
   (:func:`~fedprune.algorithms.caafp.choose_k.best_k`); the client's initial clustering is
   that K's candidate of step 2, so it equals ``--init kmeans-ae`` with ``--local-k K_i``.

Interpretations:

* What is clustered: the paper's local step is "any suitable unsupervised algorithm" (Phase
  1, line 3); ours is k-means on autoencoder codes (:mod:`fedprune.algorithms.fedcref.initial`,
  DEC's first stage), so the candidates and their silhouettes are on the codes, the space the
  clustering itself measures distances in, not on the raw pixels. With your own autoencoder
  the codes are its narrowest inner layer's output, or the samples themselves when it has
  none (:meth:`~fedprune.algorithms.fedcref.local_models.LocalTrainer.encode`).
* No threshold: CA-AFP keeps K = 1 below ``MIN_SILHOUETTE``, but FedCRef's system has
  2 <= K_i (Sec. 3, "with 2 <= K_i < K_G"; Algorithm 2 forms K_i >= 2 clusters), and that
  threshold was measured on clients' model updates, not on codes. K_i is always in
  2..``max_local_k``; the silhouettes are recorded so the choice can be judged.
* Every K in 2..``max_local_k`` must be scorable: the silhouette needs K <= n_i - 1, so each
  client needs at least ``max_local_k`` + 1 samples; fewer is one
  :class:`~fedprune.errors.ConfigError` line before anything is trained
  (:func:`check_choosable`). A candidate whose k-means leaves fewer than K distinct clusters
  (codes with fewer than K distinct values) is not scored (``null`` in the record); a client
  with no scorable K is a :class:`~fedprune.errors.DataError`.
* Cost: the silhouette is quadratic in n_i; above :data:`SILHOUETTE_SAMPLES` samples it is
  computed on a seeded random subset of that many (scikit-learn's ``sample_size``).
* One shot, before the first iteration: K_i is not revised later (Algorithm 2 keeps K_i).
* Privacy: the choice runs on the client alone; nothing of its data or silhouettes leaves
  it. The only thing the federation learns is K_i itself, through the number of cluster
  models the client exchanges in Phase 2, as with a given K_i. ``local_k.json`` in the run
  directory is the simulation's record of every client's choice, for the experimenter.

References: P. J. Rousseeuw, "Silhouettes: a graphical aid to the interpretation and
validation of cluster analysis", J. Comput. Appl. Math. 20 (1987) 53-65.

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> blobs = np.concatenate([rng.normal(c, 0.05, (20, 2)) for c in ((0, 0), (1, 0), (0, 1))])
>>> choose_local_k(blobs, max_local_k=5, seed=0)[0].chosen
3
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import silhouette_score

from fedprune.algorithms.caafp.choose_k import best_k
from fedprune.algorithms.fedcref.initial import embedding_codes, kmeans_labels
from fedprune.algorithms.fedcref.local_models import LocalTrainer
from fedprune.errors import ConfigError, DataError
from fedprune.runs import names
from fedprune.runs.files import damaged, read_json_object, write_json

LOCAL_K = names.LOCAL_K
SILHOUETTE_SAMPLES = 5000
RULE = (
    "largest mean silhouette (Euclidean, on the autoencoder codes) of k-means with K = "
    "2..max_local_k; a tie to the smaller K"
)


@dataclasses.dataclass(frozen=True)
class LocalKChoice:
    """One client's choice: its number of ``samples``, the mean silhouette of every K scored
    (K -> value; a K whose k-means found fewer than K clusters is absent), the largest K
    tried and the K ``chosen``."""

    samples: int
    silhouettes: Mapping[int, float]
    max_local_k: int
    chosen: int

    def record(self) -> dict:
        """The JSON form: K -> silhouette with string keys, ``null`` for a K not scored."""
        return {
            "samples": self.samples,
            "chosen": self.chosen,
            "silhouette": {
                str(k): (float(self.silhouettes[k]) if k in self.silhouettes else None)
                for k in range(2, self.max_local_k + 1)
            },
        }


def check_choosable(sizes: Sequence[int], max_local_k: int, names: Sequence[str]) -> None:
    """Refuse (one :class:`~fedprune.errors.ConfigError` line) a ``max_local_k`` below 2 or a
    client (``names[i]`` holds ``sizes[i]`` samples) with fewer than ``max_local_k`` + 1
    samples: the silhouette of K clusters needs K <= n - 1 (module docstring)."""
    if isinstance(max_local_k, bool) or not isinstance(max_local_k, int) or max_local_k < 2:
        raise ConfigError(f"--max-local-k must be an integer >= 2, got {max_local_k!r}")
    for name, n in zip(names, sizes, strict=True):
        if n < max_local_k + 1:
            fix = (
                f"pass --max-local-k {n - 1} or less"
                if n >= 3
                else "give it at least 3 samples, or pass --local-k K"
            )
            raise ConfigError(
                f"{name} holds {n} samples, but --local-k auto scores K = 2..{max_local_k} "
                f"by the silhouette, which needs at least {max_local_k + 1}; {fix}"
            )


def candidate_clusterings(codes: np.ndarray, max_local_k: int, seed: int) -> dict[int, np.ndarray]:
    """Step 2's candidates: K -> k-means labels of ``codes`` for K = 2..``max_local_k``
    (:func:`~fedprune.algorithms.fedcref.initial.kmeans_labels`, seeded)."""
    with warnings.catch_warnings():  # fewer distinct codes than K: handled by the scoring
        warnings.simplefilter("ignore", ConvergenceWarning)
        return {k: kmeans_labels(codes, k, seed) for k in range(2, max_local_k + 1)}


def silhouettes_by_k(
    codes: np.ndarray, clusterings: Mapping[int, np.ndarray], seed: int
) -> dict[int, float]:
    """K -> mean silhouette of ``clusterings[K]`` over ``codes`` (float64, Euclidean; on a
    seeded subset of :data:`SILHOUETTE_SAMPLES` rows for larger clients), for every K whose
    clustering has K distinct clusters (the others are left out)."""
    x = np.asarray(codes, dtype=np.float64)
    n = len(x)
    subset = None if n <= SILHOUETTE_SAMPLES else SILHOUETTE_SAMPLES
    scores = {}
    for k, labels in sorted(clusterings.items()):
        if np.unique(labels).size != k or k > n - 1:
            continue
        scores[k] = float(silhouette_score(x, labels, sample_size=subset, random_state=seed))
    return scores


def choose_local_k(
    codes: np.ndarray, max_local_k: int, seed: int, name: str = "the client"
) -> tuple[LocalKChoice, np.ndarray]:
    """Steps 2-3 on one client's ``codes``: its choice and the chosen K's clustering (int64
    labels, what ``kmeans_labels(codes, chosen, seed)`` gives). ``name`` names the client in
    the :class:`~fedprune.errors.DataError` raised when no K can be scored."""
    check_choosable([len(codes)], max_local_k, [name])
    clusterings = candidate_clusterings(codes, max_local_k, seed)
    scores = silhouettes_by_k(codes, clusterings, seed)
    if not scores:
        raise DataError(
            f"{name}: its codes take too few distinct values for k-means to form 2 or more "
            "clusters, so no K can be scored by the silhouette; pass --local-k K"
        )
    chosen = best_k(scores)
    return LocalKChoice(len(codes), scores, max_local_k, chosen), clusterings[chosen]


def choose_from_data(
    x: np.ndarray, max_local_k: int, trainer: LocalTrainer, seed: int, name: str = "the client"
) -> tuple[LocalKChoice, np.ndarray]:
    """The whole rule on one client's samples ``x`` (step 1, then :func:`choose_local_k`):
    its choice and its initial clustering, equal to ``kmeans_on_embeddings(x, chosen,
    trainer, seed)``."""
    return choose_local_k(embedding_codes(x, trainer, seed), max_local_k, seed, name)


def comparison(chosen: Sequence[int], classes: Sequence[int]) -> dict[str, float]:
    """How the chosen K_i compare with the clients' class counts (evaluation only): their
    mean absolute difference and the fraction of clients where they are equal.

    >>> comparison([2, 3, 4, 2], [2, 3, 3, 5])
    {'mean_abs_diff': 1.0, 'exact_fraction': 0.5}
    """
    a, b = np.asarray(chosen), np.asarray(classes)
    return {
        "mean_abs_diff": float(np.mean(np.abs(a - b))),
        "exact_fraction": float(np.mean(a == b)),
    }


def local_k_record(
    choices: Sequence[LocalKChoice],
    classes: Sequence[int] | None = None,
    client_ids: Sequence[int] | None = None,
) -> dict:
    """``local_k.json``: the rule, ``max_local_k``, the ``chosen`` K_i in client order and
    their ``mean``, one entry per client (:meth:`LocalKChoice.record`, with its ``client_id``
    for your own table); with the clients' class counts also ``classes`` and their
    :func:`comparison` (evaluation only: the choice never sees them)."""
    chosen = [c.chosen for c in choices]
    clients = []
    for i, choice in enumerate(choices):
        entry = {"client": i, **choice.record()}
        if client_ids is not None:
            entry["client_id"] = int(client_ids[i])
        if classes is not None:
            entry["classes"] = int(classes[i])
        clients.append(entry)
    record = {
        "rule": RULE,
        "max_local_k": choices[0].max_local_k if choices else None,
        "chosen": chosen,
        "mean": float(np.mean(chosen)),
        "clients": clients,
    }
    if classes is not None:
        record["classes"] = [int(c) for c in classes]
        record.update(comparison(chosen, classes))
    return record


def write_local_k(run: Path, record: Mapping) -> None:
    """Write :func:`local_k_record`'s dict to the run directory ``run``."""
    write_json(Path(run) / LOCAL_K, dict(record))


def read_local_k(run: Path, num_clients: int, max_local_k: int) -> list[int] | None:
    """The chosen K_i recorded in ``run`` (``None`` when the file is not there yet); a file
    that does not hold ``num_clients`` integers in 2..``max_local_k`` is damaged."""
    path = Path(run) / LOCAL_K
    if not path.exists():
        return None
    chosen = read_json_object(path).get("chosen")
    if (
        not isinstance(chosen, list)
        or len(chosen) != num_clients
        or not all(isinstance(k, int) and 2 <= k <= max_local_k for k in chosen)
    ):
        raise damaged(
            path,
            ValueError(f"'chosen' is not {num_clients} integers K_i in 2..{max_local_k}"),
        )
    return chosen
