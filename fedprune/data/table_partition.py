"""Client splits for Fed-HIRE experiments (§4.1): ``paper`` and ``authors``.

* ``paper`` -- "The k-means algorithm is applied to each global cluster to generate several
  clusterlets. These clusterlets are subsequently randomly allocated to different clients"
  with "L = 8" (§4.1). The number of clusterlets per class is not given: default
  ``clusterlets_per_class = 4`` (capped at the class size), so a class reaches at most half of
  the 8 clients ("fragmented"). k-means (``n_init=10``) per class, then each clusterlet goes to
  a client drawn uniformly; a draw that leaves a client with fewer than 2 objects is redrawn
  (at most 100 times, then a ConfigError). Every object lands in exactly one client. The
  classes are used only here and in the evaluation, never by the algorithm.
* ``authors`` -- the authors' 8 client splits as row indices
  (``fedprune/data/fedhire_author_splits.json``: the splits the authors' public repository
  ships, as row indices into the UCI files, found by matching them value by value after the
  authors' preprocessing, every feature z-scored with the mean and the population standard
  deviation of the whole dataset). Rows may repeat and not every row is used. For Statlog
  Vehicle the splits leave out row 752 (the first line of ``xai.dat``), so a 846-row table
  loses that row first.
* Preprocessing -- both schemes z-score every feature with the whole dataset's mean and
  population std (``ddof=0``); a constant feature is only centred. The split keeps the
  table as read (``raw``), the z-score's constants (``mean``, ``scale``) and, where the
  loader names them, the columns: what a new sample needs to be encoded as the run encoded
  its objects (:mod:`fedprune.runs.assigner`).
* Your own clients -- :meth:`FederatedSplit.from_clients` stacks one array per client (and,
  optionally, their classes) into the same split, used as it is (no z-score): what
  :func:`fedprune.algorithms.fedhire.experiment.run_fedhire` takes as ``table``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
from sklearn.cluster import KMeans

from fedprune.checks import check_choice, check_count, check_seed
from fedprune.errors import ConfigError, DataError

PARTITIONS = ("paper", "authors")
AUTHOR_SPLITS = Path(__file__).resolve().with_name("fedhire_author_splits.json")
CODES = {
    "ecoli": "EC",
    "user_knowledge_modeling": "US",
    "statlog_vehicle": "VE",
    "hcv_egypt": "EP",
    "yeast": "YE",
    "cardiotocography": "CA",
    "statlog_landsat": "LA",
    "wine_quality": "WI",
    "pendigits": "PE",
    "letter_recognition": "LE",
}
_VEHICLE_DROPPED_ROW = 752


@dataclasses.dataclass(frozen=True)
class FederatedSplit:
    """The clients' objects: ``rows`` per client the row indices into ``x`` (1-D integers;
    a row may belong to several clients, and not every row to one); ``x`` the preprocessed
    table (n, d); ``y`` each row's class (n,), or ``None`` for a table without classes. The
    classes are ground truth for the evaluation (and the paper partition) only: no clusterer
    sees them.

    How ``x`` came from the table: ``raw`` is the table as read (same rows as ``x``), and
    ``x = (raw - mean) / scale`` per column (:func:`zscore_constants`); ``columns`` names the
    columns. ``None`` where ``x`` is the table as given (your own table)."""

    rows: list[np.ndarray]
    x: np.ndarray
    y: np.ndarray | None = None
    raw: np.ndarray | None = None
    mean: np.ndarray | None = None
    scale: np.ndarray | None = None
    columns: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if np.ndim(self.x) != 2:
            raise DataError(f"the table must be 2-D (objects x features), got {np.ndim(self.x)}-D")
        n = np.shape(self.x)[0]
        if self.y is not None and np.shape(self.y) != (n,):
            raise DataError(
                f"the classes must be one per row of the table ({n}), got {np.shape(self.y)}"
            )
        for client, rows in enumerate(self.rows):
            rows = np.asarray(rows)
            if rows.ndim != 1 or (rows.size and not np.issubdtype(rows.dtype, np.integer)):
                raise DataError(f"client {client}'s rows must be a vector of row indices")
            if rows.size and (rows.min() < 0 or rows.max() >= n):
                raise DataError(
                    f"client {client} indexes row {int(rows.max())}; the table has {n} rows"
                )

    @classmethod
    def from_clients(
        cls, client_x: list[np.ndarray], client_y: list[np.ndarray] | None = None
    ) -> FederatedSplit:
        """One (n_l, d) array per client (and, optionally, each one's classes (n_l,)) as a
        split: ``x`` is the clients' rows one after the other, client ``l`` holds the next
        ``n_l`` of them."""
        if len(client_x) < 1:
            raise DataError("the table needs at least one client, got 0")
        arrays = [np.asarray(x) for x in client_x]
        for client, x in enumerate(arrays):
            if x.ndim != 2 or x.shape[1] != arrays[0].shape[1]:
                raise DataError(
                    f"client {client}'s objects must be a 2-D array with client 0's "
                    f"{np.shape(arrays[0])[-1]} features, got shape {x.shape}"
                )
        bounds = np.cumsum([0] + [x.shape[0] for x in arrays])
        rows = [np.arange(a, b, dtype=np.int64) for a, b in zip(bounds[:-1], bounds[1:])]
        y = None
        if client_y is not None:
            if len(client_y) != len(arrays):
                raise DataError(f"{len(client_y)} class vectors for {len(arrays)} clients")
            classes = [np.asarray(c) for c in client_y]
            for client, (x, c) in enumerate(zip(arrays, classes)):
                if c.shape != (x.shape[0],):
                    raise DataError(
                        f"client {client} holds {x.shape[0]} objects and {c.shape} classes"
                    )
            y = np.concatenate(classes)
        return cls(rows, np.concatenate(arrays), y)

    def client_x(self) -> list[np.ndarray]:
        return [self.x[r] for r in self.rows]

    def client_y(self) -> list[np.ndarray] | None:
        """Each client's classes, or ``None`` when the table has none."""
        return None if self.y is None else [self.y[r] for r in self.rows]


def zscore_constants(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, scale) per feature of :func:`zscore_population`: the mean and the population
    std, 1 for a constant feature (float64)."""
    x = np.asarray(x, dtype=np.float64)
    std = x.std(axis=0)
    return x.mean(axis=0), np.where(std > 0, std, 1.0)


def zscore_population(x: np.ndarray) -> np.ndarray:
    """Each feature minus its mean, over its population std (constant features: centred)."""
    x = np.asarray(x, dtype=np.float64)
    mean, scale = zscore_constants(x)
    return (x - mean) / scale


def paper_partition(
    x: np.ndarray,
    y: np.ndarray,
    num_clients: int = 8,
    seed: int = 0,
    clusterlets_per_class: int = 4,
) -> list[np.ndarray]:
    """§4.1's split: per class k-means clusterlets, each to a random client (docstring)."""
    if isinstance(num_clients, int) and not isinstance(num_clients, bool) and num_clients < 1:
        raise ConfigError(f"--num-clients (L) must be an integer >= 1, got {num_clients}")
    check_count("num_clients", num_clients)
    check_count("clusterlets_per_class", clusterlets_per_class)
    check_seed(seed)
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y)
    if x.shape[0] < 2 * num_clients:
        raise ConfigError(
            f"--num-clients {num_clients} needs at least {2 * num_clients} objects, got "
            f"{x.shape[0]}"
        )
    rng = np.random.default_rng(seed)
    pieces: list[np.ndarray] = []
    for cls in np.unique(y):
        members = np.flatnonzero(y == cls)
        k = min(clusterlets_per_class, members.size)
        if k == 1:
            pieces.append(members)
            continue
        km = KMeans(k, n_init=10, random_state=int(rng.integers(2**31 - 1))).fit(x[members])
        pieces.extend(members[km.labels_ == j] for j in range(k) if np.any(km.labels_ == j))
    sizes = np.array([p.size for p in pieces])
    for _ in range(100):
        owner = rng.integers(num_clients, size=len(pieces))
        if np.bincount(owner, weights=sizes, minlength=num_clients).min() >= 2:
            break
    else:
        raise ConfigError(
            f"--num-clients {num_clients}: 100 random allocations of {len(pieces)} clusterlets "
            "left a client with fewer than 2 objects; use fewer clients or more clusterlets"
        )
    return [
        np.sort(np.concatenate([pieces[i] for i in np.flatnonzero(owner == c)]))
        for c in range(num_clients)
    ]


def author_rows(name: str, path: Path | None = None) -> list[np.ndarray]:
    """The authors' client splits of dataset ``name`` (a loader name or the README's code)."""
    code = CODES.get(name, name)
    path = path or AUTHOR_SPLITS
    try:
        table = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise DataError(f"cannot read the Fed-HIRE author splits {path}: {err}") from err
    if code not in table:
        raise ConfigError(f"no author splits for {name!r}; known: {', '.join(CODES)}")
    return [np.asarray(rows, dtype=np.int64) for rows in table[code]["clients"]]


def make_split(
    name: str,
    x: np.ndarray,
    y: np.ndarray,
    partition: str = "paper",
    num_clients: int = 8,
    seed: int = 0,
    clusterlets_per_class: int = 4,
) -> FederatedSplit:
    """``--partition paper`` or ``authors`` of dataset ``name`` (features ``x``, classes ``y``)."""
    check_choice("partition", partition, PARTITIONS)
    x, y = np.asarray(x), np.asarray(y)
    if partition == "authors":
        if CODES.get(name) == "VE" and x.shape[0] == 846:
            keep = np.arange(846) != _VEHICLE_DROPPED_ROW
            x, y = x[keep], y[keep]
        rows = author_rows(name)
        top = max(int(r.max()) for r in rows)
        if top >= x.shape[0]:
            raise DataError(f"author splits of {name} index row {top}; the table has {x.shape[0]}")
        return FederatedSplit(rows, zscore_population(x), y, x, *zscore_constants(x))
    z = zscore_population(x)
    rows = paper_partition(z, y, num_clients, seed, clusterlets_per_class)
    return FederatedSplit(rows, z, y, x, *zscore_constants(x))
