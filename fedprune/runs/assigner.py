"""What a clustering run keeps so that a device can label a new sample as the run labelled
its own objects: the *assigner* (``assigner.npz`` in the run directory; ``edge-export`` turns
it into one small TFLite file per client, :mod:`edge_export.assigner`).

Each method labels an object of client ``l`` in two steps, and the assigner keeps both:

1. the object's *centre* among the client's centres, the one with the lowest key
   ``d²_j = Σ_z a_jz (z_z - c_jz)²`` (``similarity="gaussian"``: key ``d²_j - 2 ln f_j``;
   ``"inverse"``: ``ln(d_j + 1e-12) - ln f_j``), where ``z`` is the encoded object;
2. the cluster of that centre, from a table of one entry per centre.

Which centres, weights ``a`` and factors ``f`` each method keeps:
:mod:`fedprune.algorithms.fedhire.assigner`.

The encoding of a sample (what the run did to the table before clustering): the UCI tables
are z-scored per column with the whole table's mean and population std (``mean``,
``scale``; :func:`fedprune.data.table_partition.zscore_constants`), your own tables are
clustered as given. Every column is a number as the table holds it (the tables' categorical
columns are already numeric codes; none is one-hot encoded), in the order of ``columns``.

This module reads and writes the file; it imports no algorithm, so ``edge-export`` reads a
run's assigner as it reads any run directory.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np

from fedprune.runs import names
from fedprune.runs.artefacts import check_arrays
from fedprune.runs.files import damaged, read_npz, write_npz

__all__ = ["SIMILARITIES", "Assigner", "ClientAssigner", "normalization", "read_assigner"]

SIMILARITIES = ("gaussian", "inverse")
_EPS = 1e-12  # Fed-HIRE's inverse similarity 1 / (d + 1e-12) (Eq. 2)


@dataclasses.dataclass(frozen=True)
class ClientAssigner:
    """One client's step 1 and 2 (module docstring): ``centres`` (k, d) in the encoded space,
    ``clusters`` (k,) the cluster of each; ``weights`` (k, d) the ``a`` of the squared
    differences (``None``: all 1) and ``log_factors`` (k,) ``ln f`` (``None``: all 0)."""

    centres: np.ndarray
    clusters: np.ndarray
    weights: np.ndarray | None = None
    log_factors: np.ndarray | None = None

    @property
    def k(self) -> int:
        return int(self.centres.shape[0])

    def keys(self, z: np.ndarray, similarity: str = "gaussian") -> np.ndarray:
        """The key of every encoded object ``z`` (n, d) and centre, (n, k), float64."""
        diff2 = (np.asarray(z, dtype=np.float64)[:, None, :] - self.centres[None]) ** 2
        d2 = (diff2 if self.weights is None else diff2 * self.weights[None]).sum(axis=2)
        lnf = 0.0 if self.log_factors is None else self.log_factors[None]
        if similarity == "inverse":
            return np.log(np.sqrt(d2) + _EPS) - lnf
        return d2 - 2.0 * lnf

    def centre_of(self, z: np.ndarray, similarity: str = "gaussian") -> np.ndarray:
        """Step 1: each encoded object's centre, (n,) int64 (ties to the lower index)."""
        return np.argmin(self.keys(z, similarity), axis=1).astype(np.int64)


@dataclasses.dataclass(frozen=True)
class Assigner:
    """A run's assigner: the method, the key's ``similarity``, ``k_star`` clusters, one
    :class:`ClientAssigner` per client (in the order of ``labels.npz``), and the encoding:
    ``z = (raw - mean) / scale`` per column (``mean``/``scale`` ``None``: ``z = raw``),
    ``columns`` the column names where the table names them. ``objects`` and
    ``object_means`` (L, d): each client's number of objects and their mean as the run
    clustered them, to recognise the run's objects when they are loaded again."""

    method: str
    similarity: str
    k_star: int
    clients: list[ClientAssigner]
    mean: np.ndarray | None = None
    scale: np.ndarray | None = None
    columns: tuple[str, ...] | None = None
    objects: tuple[int, ...] | None = None
    object_means: np.ndarray | None = None

    @property
    def features(self) -> int:
        return int(self.clients[0].centres.shape[1])

    def encode(self, raw: np.ndarray) -> np.ndarray:
        """Raw samples (n, d) as the run encoded its objects (float64)."""
        raw = np.asarray(raw, dtype=np.float64)
        return raw if self.mean is None else (raw - self.mean) / self.scale

    def assign(self, client: int, raw: np.ndarray) -> np.ndarray:
        """The cluster of each raw sample (n, d) of ``client``, in float64 (the reference the
        TFLite file is checked against)."""
        c = self.clients[client]
        return c.clusters[c.centre_of(self.encode(raw), self.similarity)]

    def rule(self) -> str:
        """In words: how a sample's cluster is decided."""
        if self.method == "fedkmeans":
            return "the nearest of the run's global centroids (squared Euclidean distance)"
        if all(c.weights is None and c.log_factors is None for c in self.clients):
            centres = "local k-means centres" if self.method == "kfed" else "clusterlet centroids"
            return (
                f"the cluster the server gave the nearest of the client's {centres} "
                "(squared Euclidean distance)"
            )
        key = (
            "sum_z m_jz (z_z - c_jz)^2 - 2 ln(gamma_j w_j)"
            if self.similarity == "gaussian"
            else "ln(sqrt(sum_z m_jz (z_z - c_jz)^2) + 1e-12) - ln(gamma_j w_j)"
        )
        return (
            "the cluster the server gave the client's clusterlet j with the lowest "
            f"{key} (FCPL's winner, Eq. 4, with the feature weights M and the mean "
            "ln(gamma w) of its last epoch)"
        )

    def to_arrays(self) -> dict[str, np.ndarray]:
        arrays: dict[str, np.ndarray] = {
            "method": np.array(self.method),
            "similarity": np.array(self.similarity),
            "k_star": np.array(self.k_star, dtype=np.int64),
            "num_clients": np.array(len(self.clients), dtype=np.int64),
        }
        if self.mean is not None:
            arrays["mean"] = np.asarray(self.mean, dtype=np.float64)
            arrays["scale"] = np.asarray(self.scale, dtype=np.float64)
        if self.columns is not None:
            arrays["columns"] = np.array(self.columns, dtype=str)
        if self.objects is not None:
            arrays["objects"] = np.asarray(self.objects, dtype=np.int64)
            arrays["object_means"] = np.asarray(self.object_means, dtype=np.float64)
        for i, c in enumerate(self.clients):
            arrays[f"centres{i}"] = np.asarray(c.centres, dtype=np.float64)
            arrays[f"clusters{i}"] = np.asarray(c.clusters, dtype=np.int64)
            if c.weights is not None:
                arrays[f"weights{i}"] = np.asarray(c.weights, dtype=np.float64)
            if c.log_factors is not None:
                arrays[f"log_factors{i}"] = np.asarray(c.log_factors, dtype=np.float64)
        return arrays

    def write(self, run_dir: str | os.PathLike) -> Path:
        """Write ``assigner.npz`` into the run directory ``run_dir``; returns its path."""
        path = Path(run_dir) / names.ASSIGNER
        write_npz(path, self.to_arrays())
        return path

    def with_encoding(
        self,
        mean: np.ndarray | None,
        scale: np.ndarray | None,
        columns: tuple[str, ...] | None = None,
    ) -> Assigner:
        """The same assigner for samples encoded by ``(raw - mean) / scale``."""
        return dataclasses.replace(self, mean=mean, scale=scale, columns=columns)

    def with_objects(self, encoded: list[np.ndarray]) -> Assigner:
        """The same assigner recording the run's objects (encoded, one array per client)."""
        return dataclasses.replace(
            self,
            objects=tuple(len(x) for x in encoded),
            object_means=np.stack([np.mean(x, axis=0) for x in encoded]),
        )

    def same_objects(self, raw: list[np.ndarray]) -> str | None:
        """``None`` if ``raw`` (one array per client, as the table holds them) are the run's
        objects (their number and, encoded, their mean per client), else what differs."""
        if self.objects is None or self.object_means is None:
            return None
        if len(raw) != len(self.objects):
            return f"{len(raw)} clients, the run {len(self.objects)}"
        for i, (x, n, mean) in enumerate(zip(raw, self.objects, self.object_means)):
            x = np.asarray(x)
            if x.ndim != 2 or x.shape[1] != self.features:
                return (
                    f"client {i}'s objects have shape {x.shape}, the run's {self.features} columns"
                )
            if len(x) != n:
                return f"client {i} has {len(x)} objects, in the run {n}"
            if not np.allclose(self.encode(x).mean(axis=0), mean, rtol=1e-6, atol=1e-9):
                return f"client {i}'s objects hold other values than the run's"
        return None


def read_assigner(run_dir: str | os.PathLike) -> Assigner:
    """The assigner of the finished run in ``run_dir``; a missing or damaged file is one
    :class:`DataError` naming it."""
    path = Path(run_dir) / names.ASSIGNER
    arrays = read_npz(path)
    numbers = {k: [v] for k, v in arrays.items() if k not in ("method", "similarity", "columns")}
    check_arrays(path, numbers)  # finite centres, weights, factors and encoding
    try:
        method = str(arrays["method"])
        similarity = str(arrays["similarity"])
        if similarity not in SIMILARITIES:
            raise ValueError(f"unknown similarity {similarity!r}")
        k_star = int(arrays["k_star"])
        count = int(arrays["num_clients"])
        clients = []
        for i in range(count):
            centres = np.asarray(arrays[f"centres{i}"], dtype=np.float64)
            clusters = np.asarray(arrays[f"clusters{i}"])
            weights = arrays.get(f"weights{i}")
            lnf = arrays.get(f"log_factors{i}")
            k = centres.shape[0] if centres.ndim == 2 else -1
            if k < 1 or clusters.shape != (k,) or clusters.dtype.kind not in "iu":
                raise ValueError(f"client {i}'s centres and clusters do not match")
            if clusters.min() < 0 or clusters.max() >= k_star:
                raise ValueError(f"client {i} names a cluster outside 0..{k_star - 1}")
            if weights is not None and weights.shape != centres.shape:
                raise ValueError(f"client {i}'s weights do not match its centres")
            if lnf is not None and lnf.shape != (k,):
                raise ValueError(f"client {i}'s factors do not match its centres")
            if i and centres.shape[1] != clients[0].centres.shape[1]:
                raise ValueError(f"client {i} has another number of features than client 0")
            clients.append(
                ClientAssigner(
                    centres,
                    clusters.astype(np.int64),
                    None if weights is None else np.asarray(weights, np.float64),
                    None if lnf is None else np.asarray(lnf, np.float64),
                )
            )
        if not clients:
            raise ValueError("no client")
        d = clients[0].centres.shape[1]
        mean, scale = arrays.get("mean"), arrays.get("scale")
        if (mean is None) != (scale is None) or (
            mean is not None and (mean.shape != (d,) or scale.shape != (d,) or (scale == 0).any())
        ):
            raise ValueError("the encoding's mean and scale do not fit the features")
        columns = arrays.get("columns")
        if columns is not None and columns.shape != (d,):
            raise ValueError("the column names do not fit the features")
        objects, object_means = arrays.get("objects"), arrays.get("object_means")
        if (objects is None) != (object_means is None) or (
            objects is not None and (objects.shape != (count,) or object_means.shape != (count, d))
        ):
            raise ValueError("the objects' numbers and means do not fit the clients")
    except (KeyError, ValueError, TypeError, IndexError) as err:
        raise damaged(path, err) from None
    return Assigner(
        method,
        similarity,
        k_star,
        clients,
        None if mean is None else np.asarray(mean, np.float64),
        None if scale is None else np.asarray(scale, np.float64),
        None if columns is None else tuple(str(c) for c in columns),
        None if objects is None else tuple(int(n) for n in objects),
        None if object_means is None else np.asarray(object_means, np.float64),
    )


def normalization(assigner: Assigner) -> str:
    """The deploy manifest's ``normalization``: the encoding in words."""
    if assigner.mean is None:
        return "none (the table's values as given)"
    return (
        "z-score per column with the whole table's mean and population std (the assigner "
        "applies it to the raw sample)"
    )
