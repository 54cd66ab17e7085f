"""AS-CFL Section 3.2.1-3.2.2: cosine similarity of client updates, full and low-rank.

Paper sentences and how they are read:

* Full similarity -- "The AS-CFL algorithm measures the similarity between clients based on
  the cosine similarity of their model updates" (3.2.1): ``S_ij = <Δw_i, Δw_j> /
  (||Δw_i|| ||Δw_j||)`` on each client's update flattened over every layer
  (:func:`cosine_similarity_matrix`). Algorithm 1, line 15.
* What is factorized -- "the AS-CFL algorithm applies low-rank matrix factorization to
  approximate S ... This factorization is applied to a subset of model parameters,
  specifically weights near the output layer" (3.2.2). Read as: the matrix ``X``
  (clients x output-layer parameters) of the clients' output-layer updates is factorized by a
  truncated SVD ``X ~ U_r Σ_r V_rᵀ``; each client's update is projected on the ``r`` kept
  components, ``z_i = V_r x_i`` (``Z = U_r Σ_r``), and ``S ~ D⁻¹ Z Zᵀ D⁻¹`` with ``D`` the
  norms of the rows of ``Z``: a rank-``r`` factorization of ``S`` computed from the
  output layer only (:func:`low_rank_similarity`), or from every Dense layer after the
  convolutions (``--low-rank-layers dense_head``; the caller picks the columns of ``X``).
* Rank -- "The rank, r, is selected based on an explained-variance ratio ≥ 95% on the
  output-layer weights" (3.2.2): the smallest ``r`` with ``sum_{i<=r} s_i² / sum_i s_i² >=
  δ`` over the singular values ``s`` of ``X`` (:func:`rank_for_explained_variance`), default
  ``δ = 0.95`` as the paper writes. The variance is *uncentered* (energy): cosines are a
  function of ``X Xᵀ``, which the uncentered truncated SVD approximates best (Eckart-Young);
  PCA's centered variance would drop the direction all clients share.
* Uplink -- the paper says both "our application of low-rank factorization is on the
  similarity matrix to reduce the computational complexity of the clustering process on the
  server side" (2.3) and "each client ... return[s] low-rank compressed updates" (3.5), "Low-rank
  aggregation reduces the average uplink traffic per round by approximately 30%" (4.2.3).
  :func:`uplink_floats` counts what one client uploads under each reading
  (``"full"``: no compression, the server-side reading; ``"shared_basis"``: the server
  broadcasts the ``r`` components and the client uploads its ``r`` coefficients instead of its
  output-layer update; ``"client_factors"``: the client sends a rank-``r`` factorization
  ``A Bᵀ`` of its own output-layer kernel update, ``r (rows + cols)`` floats).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np

from fedprune import checks
from fedprune.algorithms.ascfl._arrays import (
    ClientIds,
    check_nonzero,
    client_name,
    update_matrix,
)
from fedprune.errors import ConfigError, DataError

UplinkReading = Literal["full", "shared_basis", "client_factors"]
UPLINK_READINGS: tuple[str, ...] = ("full", "shared_basis", "client_factors")


def cosine_similarity_matrix(updates: object, client_ids: ClientIds = None) -> np.ndarray:
    """Section 3.2.1 / Algorithm 1 line 15: ``S_ij = cos(Δw_i, Δw_j)`` of flattened updates.

    Parameters
    ----------
    updates
        ``(clients, parameters)`` array, or one entry per client (an array or a list of layer
        arrays, flattened and concatenated).
    client_ids
        Names used in error messages (default: row index).

    Returns
    -------
    ``(clients, clients)`` symmetric matrix, entries in [-1, 1], ones on the diagonal.

    Raises
    ------
    DataError
        naming the client whose update is all zeros or contains nan/inf.
    """
    x = update_matrix(updates, client_ids)
    check_nonzero(x, client_ids)
    return _cosines(x)


def _cosines(x: np.ndarray) -> np.ndarray:
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    s = np.clip(unit @ unit.T, -1.0, 1.0)
    s = (s + s.T) / 2
    np.fill_diagonal(s, 1.0)
    return s


def rank_for_explained_variance(singular_values: object, threshold: float) -> int:
    """Section 3.2.2: the smallest rank ``r`` whose explained-variance ratio
    ``sum_{i<=r} s_i² / sum_i s_i²`` reaches ``threshold`` (a 1e-12 tolerance absorbs
    rounding, so a ratio of exactly ``threshold`` counts).

    >>> rank_for_explained_variance([3.0, 2.0, 1.0], 0.9)  # 9/14 = 0.64, 13/14 = 0.93
    2
    """
    checks.check_range("explained_variance", threshold, 0, 1, low_open=True)
    s = np.sort(np.asarray(singular_values, dtype=np.float64).ravel())[::-1]
    if s.size == 0 or not np.all(np.isfinite(s)) or np.any(s < 0):
        raise ConfigError(
            f"singular values must be finite and >= 0 (at least one), got {s.tolist()}"
        )
    energy = s**2
    if energy.sum() == 0:
        raise DataError("every singular value is zero: all output-layer updates are zero")
    ratio = np.cumsum(energy) / energy.sum()
    return int(np.argmax(ratio >= threshold - 1e-12)) + 1


@dataclasses.dataclass(frozen=True)
class LowRankSimilarity:
    """Result of :func:`low_rank_similarity`.

    Attributes
    ----------
    similarity
        ``(clients, clients)`` cosine similarities of the projected updates.
    rank
        ``r``, the number of components kept.
    explained_variance
        The ratio those ``r`` components reach (>= the requested threshold).
    components
        ``(r, output parameters)``, orthonormal rows ``V_rᵀ``.
    coefficients
        ``(clients, r)``, each client's update projected on the components (``U_r Σ_r``).
    """

    similarity: np.ndarray
    rank: int
    explained_variance: float
    components: np.ndarray
    coefficients: np.ndarray


def low_rank_similarity(
    output_updates: object, explained_variance: float = 0.95, client_ids: ClientIds = None
) -> LowRankSimilarity:
    """Section 3.2.2 / Algorithm 1 line 15 ("cosine similarity on Δw with low-rank
    factorization"): cosine similarity of the clients' output-layer updates projected on the
    smallest number of singular directions that explains ``explained_variance`` of them.

    Parameters
    ----------
    output_updates
        The clients' updates of the output layer only (``(clients, parameters)`` or one array
        per client), as for :func:`cosine_similarity_matrix`.
    explained_variance
        ``δ`` in (0, 1]; the paper's value is 0.95.
    client_ids
        Names used in error messages.

    Raises
    ------
    DataError
        naming a client whose output-layer update is zero, not finite, or has no component
        on the kept directions (raise ``explained_variance`` then).
    """
    checks.check_range("explained_variance", explained_variance, 0, 1, low_open=True)
    x = update_matrix(output_updates, client_ids, what="output-layer update")
    check_nonzero(x, client_ids, what="output-layer update")
    _, s, vt = np.linalg.svd(x, full_matrices=False)
    r = rank_for_explained_variance(s, explained_variance)
    components = vt[:r]
    z = x @ components.T
    norms = np.linalg.norm(z, axis=1)
    # a projection that is zero up to rounding has no direction either
    lost = norms <= 1e-12 * np.linalg.norm(x, axis=1)
    if lost.any():
        i = int(np.argmax(lost))
        raise DataError(
            f"{client_name(i, client_ids)}'s output-layer update is orthogonal to the {r} "
            "kept components; "
            f"raise explained_variance (now {explained_variance:g})"
        )
    ratio = float(np.sum(s[:r] ** 2) / np.sum(s**2))
    return LowRankSimilarity(_cosines(z), r, ratio, components, z)


def uplink_floats(
    model_size: int,
    output_shape: tuple[int, int],
    rank: int,
    reading: UplinkReading = "shared_basis",
) -> int:
    """Floats one client uploads per round under a reading of the low-rank step (see the
    module docstring; Section 3.5 "return low-rank compressed updates", 4.2.3 "Low-rank
    aggregation reduces the average uplink traffic").

    ``model_size`` counts every trainable float; ``output_shape`` is the (rows, cols) of the
    output layer's kernel, whose update is the one compressed (its bias and every other layer
    are sent in full). ``"full"``: ``model_size``; ``"shared_basis"``: ``model_size - rows*cols
    + rank``; ``"client_factors"``: ``model_size - rows*cols + rank*(rows + cols)``.

    >>> uplink_floats(1000, (20, 10), 3, "client_factors")  # 800 + 3 * 30
    890
    """
    checks.check_count("model_size", model_size)
    rows, cols = output_shape
    checks.check_count("output_rows", rows)
    checks.check_count("output_cols", cols)
    checks.check_choice("uplink_reading", reading, UPLINK_READINGS)
    kernel = rows * cols
    if kernel > model_size:
        raise ConfigError(
            f"the output kernel ({rows} x {cols} = {kernel} floats) cannot exceed "
            f"model_size ({model_size})"
        )
    limit = min(rows, cols) if reading == "client_factors" else kernel
    checks.check_count("rank", rank)
    checks.check_at_most("rank", rank, limit, f"the rank of a {rows} x {cols} kernel update")
    if reading == "full":
        return model_size
    if reading == "shared_basis":
        return shared_basis_floats(model_size, kernel, rank)
    return model_size - kernel + rank * (rows + cols)


def shared_basis_floats(model_size: int, compressed: int, rank: int) -> int:
    """Floats one client uploads when its ``r`` coefficients on the broadcast components
    replace the ``compressed`` floats of its update that were factorized (``"shared_basis"``
    reading; with ``--low-rank-layers dense_head`` every Dense layer's kernel and bias).

    >>> shared_basis_floats(1000, 300, 4)
    704
    """
    checks.check_count("model_size", model_size)
    checks.check_count("compressed", compressed)
    checks.check_at_most("compressed", compressed, model_size, "the model's size")
    checks.check_count("rank", rank)
    return model_size - compressed + rank


def uplink_saving(
    model_size: int,
    output_shape: tuple[int, int],
    rank: int,
    reading: UplinkReading = "shared_basis",
) -> float:
    """``1 - uplink_floats(...) / model_size``: the fraction of uplink traffic saved against
    sending the full update (the paper reports ~0.30, Section 4.2.3)."""
    return 1.0 - uplink_floats(model_size, output_shape, rank, reading) / model_size
