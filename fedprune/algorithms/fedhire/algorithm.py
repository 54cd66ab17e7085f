"""Fed-HIRE end to end (Algorithm 2): clients run FCPL, upload their clusterlet centroids
once; the server runs MCPL levels, builds ``X^(s)``, clusters it by weighted k-modes and sends
each client the cluster of each of its clusterlets; each object takes its clusterlet's
cluster.

The pieces are separate so that the upload can become a TFF computation:
:func:`client_step` (local, FCPL) -> :func:`upload_payload` (fixed-shape, padded arrays per
client: what crosses the network) -> :func:`server_step` (MCPL + representation + k-modes;
returns the per-client downloads) -> :func:`client_labels` (local). :func:`fed_hire` chains
them.

Paper sentences and how they are read:

* Upload -- "To preserve privacy, the l-th client uploads only the clusterlet centroids set
  C^(l)" (§3.2), Remark 2 "each local client uploading clusterlet centroids": the payload is
  the ``k^(l)`` centroids (float32, padded to ``max_clusterlets`` rows with a validity mask);
  no counts, no feature weights (the server's MCPL learns its own ``M``).
* Download -- the paper's result is ``Q^(s)`` over the centroids; "each object's label" needs
  the clusterlet -> cluster map, so each client receives one cluster number per clusterlet
  (int32, padded with -1). Bytes count 4 per float32 / int32 value; the padding and the mask
  are counted separately (``bytes_uploaded_padded``).
* Randomness -- ``seed`` feeds a ``SeedSequence``: one child per client (FCPL's initial
  centroids) and one for the server (MCPL and k-modes), so the same seed gives the same labels.
* Failed attempts -- a server attempt fails when ``X^(s)`` has fewer distinct rows than ``k*``
  or a k-modes cluster empties (:mod:`.kmodes`). The clients' one-shot upload cannot be
  repeated, so the server retries on its own: each retry re-runs MCPL and k-modes with the next
  random numbers, at most ``max_attempts`` (default 10) attempts. The result counts the failed
  ones; if all fail, the last attempt's labels are kept (``n_clusters < k*`` then says so).
* Ablations (Table 4, "✗ indicates its substitution with a conventional k-means algorithm"):
  ``client_method`` picks the client step from :data:`CLIENT_STEPS` and ``server_method`` the
  server attempt from :data:`SERVER_ATTEMPTS`. ``client_method="kmeans"`` replaces FCPL by
  k-means with ``local_k`` clusters per client (default ``k*``, capped at the client's size:
  the paper gives no number); ``server_method="kmeans"`` replaces MCPL, and with it the
  hierarchy, ``X^(s)`` and the k-modes, by one k-means of the uploaded centroids into ``k*``
  clusters.
* Labels never enter: :func:`fed_hire` takes features only.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import numpy as np
from sklearn.cluster import KMeans

from fedprune.algorithms.fedhire.cpl import CplParams, competitive_penalized_learning
from fedprune.algorithms.fedhire.hierarchy import Hierarchy, build_hierarchy
from fedprune.algorithms.fedhire.kmodes import HELLINGERS, weighted_kmodes
from fedprune.algorithms.fedhire.representation import enhanced_representation
from fedprune.checks import check_choice, check_count, check_seed
from fedprune.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class FedHireParams(CplParams):
    """Every knob of :func:`fed_hire` (defaults: §4.1 and the module docstrings): the CPL
    parameters the clients' FCPL runs with (:class:`.cpl.CplParams`, checked there) and the
    server's and hierarchy's own."""

    server_k0_ratio: float | None = None  # None: k0_ratio (§4.1 uses 0.5 for both)
    hellinger: str = "literal"
    max_levels: int = 50
    max_kmodes_iter: int = 100
    max_attempts: int = 10
    client_method: str = "fcpl"
    server_method: str = "mcpl"
    local_k: int | None = None

    def __post_init__(self) -> None:
        self.client_cpl()  # CplParams checks the CPL fields
        self.server_cpl()
        check_choice("hellinger", self.hellinger, HELLINGERS)
        check_count("max_levels", self.max_levels)
        check_count("max_kmodes_iter", self.max_kmodes_iter)
        check_count("max_attempts", self.max_attempts)
        check_choice("client_method", self.client_method, tuple(CLIENT_STEPS))
        check_choice("server_method", self.server_method, tuple(SERVER_ATTEMPTS))
        if self.local_k is not None:
            check_count("local_k", self.local_k)

    def client_cpl(self) -> CplParams:
        """The clients' FCPL parameters: this object's fields of :class:`.cpl.CplParams`."""
        return CplParams(**{f.name: getattr(self, f.name) for f in dataclasses.fields(CplParams)})

    def server_cpl(self) -> CplParams:
        ratio = self.k0_ratio if self.server_k0_ratio is None else self.server_k0_ratio
        return dataclasses.replace(self.client_cpl(), k0_ratio=ratio)


@dataclasses.dataclass(frozen=True)
class Clusterlets:
    """A client's local result: centroids (k, d) and each object's clusterlet (n,).

    ``feature_weights`` (k, d) and ``log_factors`` (k,): FCPL's feature-cluster weights
    ``M`` and the mean ``ln(γ_j w_j)`` of Eq. 4 in its last epoch (:class:`.cpl.CplResult`),
    which decide the clusterlet of a new object; ``None`` for k-means clusterlets (the
    nearest centroid)."""

    centroids: np.ndarray
    labels: np.ndarray
    epochs: int = 0
    feature_weights: np.ndarray | None = None
    log_factors: np.ndarray | None = None


@dataclasses.dataclass(frozen=True)
class Payload:
    """One client's upload, fixed shape: centroids (K, d) float32, mask (K,) bool."""

    centroids: np.ndarray
    mask: np.ndarray


@dataclasses.dataclass(frozen=True)
class ServerResult:
    """assignments: per client (K,) int32, cluster of each clusterlet, -1 on padding;
    hierarchy: MCPL's ``H`` of the kept attempt (None for ``server_method="kmeans"``);
    failed_attempts; n_clusters: distinct clusters assigned."""

    assignments: list[np.ndarray]
    hierarchy: Hierarchy | None
    failed_attempts: int
    n_clusters: int
    failures: list[str]


@dataclasses.dataclass(frozen=True)
class FedHireResult:
    """labels: per client (n_l,) int64 in ``0..k*-1``; clusterlets per client (``k^(l)``);
    hierarchy ``k`` per kept level (``level_ks``) and the full trace; failed server attempts;
    communication in bytes (4 per value); each client's FCPL epochs (Algorithm 1's M) and the
    CPU seconds (``time.process_time``) of the client steps together and of the server step,
    the two sides of §3.5's cost (measured in one process; a real federation runs the client
    steps in parallel)."""

    labels: list[np.ndarray]
    clusterlets: list[int]
    level_ks: list[int]
    k_trace: list[int]
    failed_attempts: int
    n_clusters: int
    bytes_uploaded: int
    bytes_uploaded_padded: int
    bytes_downloaded: int
    server: ServerResult
    client_epochs: list[int]
    cpu_s_clients: float
    cpu_s_server: float


def check_client_data(client_data: list[np.ndarray]) -> list[np.ndarray]:
    """Each client: a 2-D finite array with >= 2 objects and the same ``d``; float64 copies."""
    if len(client_data) < 1:
        raise ConfigError("fed_hire needs at least one client (L >= 1), got 0")
    out = []
    d = None
    for index, data in enumerate(client_data):
        arr = np.asarray(data, dtype=np.float64)
        if arr.ndim != 2 or arr.shape[0] < 2:
            n = arr.shape[0] if arr.ndim >= 1 else 0
            raise ConfigError(
                f"client {index} has {n} object(s); every client needs at least 2 (FCPL)"
            )
        bad = ~np.isfinite(arr).all(axis=1)
        if bad.any():
            raise ConfigError(
                f"client {index} row {int(np.argmax(bad))} holds NaN or inf; clean the data"
            )
        if d is None:
            d = arr.shape[1]
        elif arr.shape[1] != d:
            raise ConfigError(f"client {index} has {arr.shape[1]} features, client 0 has {d}")
        out.append(arr)
    return out


def fcpl_clusterlets(
    x: np.ndarray, rng: np.random.Generator, params: FedHireParams, k_star: int
) -> Clusterlets:
    """FCPL (Algorithm 1) on one client's objects: the clusterlets competitive penalized
    learning keeps (``k_star`` does not enter: the clusterlets find their own number)."""
    result = competitive_penalized_learning(x, rng, params.client_cpl(), record_factors=True)
    return Clusterlets(
        result.centroids, result.labels, result.epochs, result.feature_weights, result.log_factors
    )


def kmeans_clusterlets(
    x: np.ndarray, rng: np.random.Generator, params: FedHireParams, k_star: int
) -> Clusterlets:
    """Table 4's client ablation: k-means with ``local_k`` clusters (default ``k*``, capped at
    the client's size), seeded from ``rng``; clusters left empty are dropped and the rest
    numbered ``0..k-1``."""
    k = min(params.local_k or k_star, x.shape[0])
    seed = int(rng.integers(2**31 - 1))
    km = KMeans(k, n_init=10, random_state=seed).fit(x)
    labels = km.labels_.astype(np.int64)
    keep = np.unique(labels)
    relabel = np.full(k, -1, dtype=np.int64)
    relabel[keep] = np.arange(keep.size)
    return Clusterlets(km.cluster_centers_[keep], relabel[labels], int(km.n_iter_))


ClientStep = Callable[[np.ndarray, np.random.Generator, FedHireParams, int], Clusterlets]
# ``client_method`` -> the client's clustering (Algorithm 2 lines 1-2, or Table 4's k-means)
CLIENT_STEPS: dict[str, ClientStep] = {"fcpl": fcpl_clusterlets, "kmeans": kmeans_clusterlets}


def client_step(
    x: np.ndarray, rng: np.random.Generator, params: FedHireParams, k_star: int
) -> Clusterlets:
    """Algorithm 2 lines 1-2 on one client: ``params.client_method``'s step of
    :data:`CLIENT_STEPS` (FCPL, or k-means for the ablation)."""
    return CLIENT_STEPS[params.client_method](x, rng, params, k_star)


def upload_payload(clusterlets: Clusterlets, max_clusterlets: int) -> Payload:
    """Algorithm 2 line 3: the centroids as float32, padded to ``max_clusterlets`` rows."""
    k, d = clusterlets.centroids.shape
    if k > max_clusterlets:
        raise ConfigError(f"client has {k} clusterlets, more than the padding {max_clusterlets}")
    centroids = np.zeros((max_clusterlets, d), dtype=np.float32)
    centroids[:k] = clusterlets.centroids
    mask = np.zeros(max_clusterlets, dtype=bool)
    mask[:k] = True
    return Payload(centroids, mask)


def mcpl_attempt(
    points: np.ndarray, k_star: int, rng: np.random.Generator, params: FedHireParams
) -> tuple[np.ndarray, Hierarchy | None, str | None]:
    """One server attempt of Algorithm 2 lines 5-25: MCPL levels, ``X^(s)`` (Eq. 12) and the
    weighted k-modes into ``k_star``; (labels, hierarchy, why it failed or ``None``)."""
    hierarchy = build_hierarchy(points, rng, params.server_cpl(), params.max_levels)
    codes = enhanced_representation(hierarchy.levels)
    result = weighted_kmodes(
        codes, k_star, rng, params.hellinger, params.max_kmodes_iter, params.norm
    )
    return result.labels, hierarchy, result.failure


def kmeans_attempt(
    points: np.ndarray, k_star: int, rng: np.random.Generator, params: FedHireParams
) -> tuple[np.ndarray, Hierarchy | None, str | None]:
    """Table 4's server ablation: one k-means of the centroids into ``k_star``, seeded from
    ``rng``; no hierarchy, and it never fails."""
    seed = int(rng.integers(2**31 - 1))
    labels = KMeans(k_star, n_init=10, random_state=seed).fit(points).labels_
    return labels.astype(np.int64), None, None


ServerAttempt = Callable[
    [np.ndarray, int, np.random.Generator, FedHireParams],
    tuple[np.ndarray, Hierarchy | None, str | None],
]
# ``server_method`` -> one server attempt (MCPL + k-modes, or Table 4's k-means)
SERVER_ATTEMPTS: dict[str, ServerAttempt] = {"mcpl": mcpl_attempt, "kmeans": kmeans_attempt}


def server_step(
    payloads: list[Payload],
    k_star: int,
    rng: np.random.Generator,
    params: FedHireParams | None = None,
) -> ServerResult:
    """Algorithm 2 lines 5-25 on the uploads: clusterlet -> cluster per client (padded)."""
    params = params or FedHireParams()
    check_count("k_star", k_star)
    points = np.concatenate([p.centroids[p.mask] for p in payloads]).astype(np.float64)
    if k_star > points.shape[0]:
        raise ConfigError(
            f"--k-star must be at most {points.shape[0]} (the clusterlet centroids uploaded), "
            f"got {k_star}"
        )
    attempt = SERVER_ATTEMPTS[params.server_method]
    failures: list[str] = []
    labels, hierarchy = None, None
    for _ in range(params.max_attempts):
        labels, hierarchy, failure = attempt(points, k_star, rng, params)
        if failure is None:
            break
        failures.append(failure)
    assert labels is not None
    assignments = []
    start = 0
    for p in payloads:
        out = np.full(p.mask.shape[0], -1, dtype=np.int32)
        k = int(p.mask.sum())
        out[np.flatnonzero(p.mask)] = labels[start : start + k]
        assignments.append(out)
        start += k
    n_clusters = int(np.unique(labels).size)
    return ServerResult(assignments, hierarchy, len(failures), n_clusters, failures)


def client_labels(clusterlets: Clusterlets, assignment: np.ndarray) -> np.ndarray:
    """Each object's cluster: its clusterlet's entry of the downloaded assignment."""
    return assignment[clusterlets.labels].astype(np.int64)


def fed_hire(
    client_data: list[np.ndarray], k_star: int, seed: int, **params: object
) -> FedHireResult:
    """Fed-HIRE (Algorithm 2) on ``client_data`` (one (n_l, d) array per client).

    ``params`` are the fields of :class:`FedHireParams`. Returns each client's labels in
    ``0..k*-1``, the hierarchy, the failed server attempts and the bytes moved.
    """
    check_seed(seed)
    check_count("k_star", k_star)
    config = FedHireParams(**params)  # type: ignore[arg-type]
    data = check_client_data(client_data)
    children = np.random.SeedSequence(seed).spawn(len(data) + 1)
    start = time.process_time()
    local = [
        client_step(x, np.random.default_rng(child), config, k_star)
        for x, child in zip(data, children[:-1])
    ]
    width = max(c.centroids.shape[0] for c in local)
    payloads = [upload_payload(c, width) for c in local]
    clients_done = time.process_time()
    server = server_step(payloads, k_star, np.random.default_rng(children[-1]), config)
    server_done = time.process_time()
    labels = [client_labels(c, a) for c, a in zip(local, server.assignments)]
    d = data[0].shape[1]
    ks = [c.centroids.shape[0] for c in local]
    hierarchy = server.hierarchy
    return FedHireResult(
        labels=labels,
        clusterlets=ks,
        level_ks=list(hierarchy.ks) if hierarchy else [],
        k_trace=list(hierarchy.k_trace) if hierarchy else [],
        failed_attempts=server.failed_attempts,
        n_clusters=server.n_clusters,
        bytes_uploaded=4 * d * sum(ks),
        bytes_uploaded_padded=len(local) * width * (4 * d + 1),
        bytes_downloaded=4 * sum(ks),
        server=server,
        client_epochs=[c.epochs for c in local],
        cpu_s_clients=clients_done - start,
        cpu_s_server=server_done - clients_done,
    )
