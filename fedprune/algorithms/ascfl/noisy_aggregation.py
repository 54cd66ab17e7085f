"""AS-CFL Section 3.4 / Algorithm 1 lines 25-36: intra-cluster aggregation with optional
clipping and Gaussian noise; the (ε, δ) such a run spends is
:func:`fedprune.privacy.accounting.privacy_spent` (RDP accountant of ``dp_accounting``).

Paper sentences and how they are read:

* Weights -- "The weight for each client is proportional to the size of its local dataset"
  (3.4): ``p_i = n_i / sum_{j in k} n_j``; the cluster model is ``w_k + sum_i p_i Δw_i``
  ("applying the weighted average of the local updates from its constituent clients to the
  cluster's model from the previous round", 3.4). This module returns the averaged update.
* Clipping -- "The differential privacy parameters are set to ε and δ, with the noise scale,
  σ calculated accordingly" (4.1) names no clipping bound, but a Gaussian mechanism's noise is
  calibrated to the L2 sensitivity, which only a bound makes finite. Read as: each update is
  clipped to norm ``C`` (``u * min(1, C / ||u||)``) and ``σ`` is ``z`` (the noise multiplier)
  times the sensitivity. Noise therefore requires ``clip_norm``; clipping alone is allowed.
* Where the noise goes -- Algorithm 1 line 27 "Add noise to updates before aggregation" and
  3.5 "injects calibrated Gaussian noise to each client's update vector before aggregating
  them" say per client; a central reading adds it once to the cluster's average (as
  DP-FedAvg does). Both are offered by ``placement``:
  ``"aggregate"`` (default): ``N(0, σ²I)`` added to the weighted average, ``σ = z C max_i
  p_i`` -- the sensitivity of a weighted average to one client's clipped update, which is
  ``z C / |cluster|`` for equal weights; ``"client"``: ``N(0, (z C)² I)`` added to every
  clipped update, then averaged (the average then carries ``z C sqrt(sum_i p_i²)``).
* Accounting -- per round every client is in exactly one cluster, whose release is a
  Gaussian mechanism with noise multiplier ``z`` relative to that client's sensitivity under
  either placement; ``rounds`` of them compose (``SelfComposedDpEvent``), each
  Poisson-subsampled with ``sampling_rate`` when only a fraction of the clients takes part
  (``PoissonSampledDpEvent``; the paper's runs use every client, ``q = 1``). Adjacency:
  adding or removing one client (client-level DP). The guarantee covers the released cluster
  models only: Algorithm 1 computes the similarity matrix (line 15) and the incentive
  evaluations (line 16) on the un-noised updates, before line 27 adds noise, so the cluster
  memberships themselves are not protected.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np

from fedprune import checks
from fedprune.algorithms.ascfl._arrays import ClientIds, update_matrix, weights_from_sizes
from fedprune.errors import ConfigError

NoisePlacement = Literal["aggregate", "client"]
NOISE_PLACEMENTS: tuple[str, ...] = ("aggregate", "client")


def clip_updates(
    updates: object, clip_norm: float, client_ids: ClientIds = None
) -> tuple[np.ndarray, np.ndarray]:
    """Scale every update to L2 norm at most ``clip_norm``: ``u * min(1, C / ||u||)``.

    Returns the clipped ``(clients, parameters)`` matrix and a boolean mask of the clients
    whose update was shortened.

    >>> clipped, was = clip_updates([[3.0, 4.0], [0.3, 0.4]], 1.0)
    >>> clipped.round(12).tolist(), was.tolist()
    ([[0.6, 0.8], [0.3, 0.4]], [True, False])
    """
    checks.check_positive("clip_norm", clip_norm)
    x = update_matrix(updates, client_ids)
    norms = np.linalg.norm(x, axis=1)
    over = norms > clip_norm
    scale = np.ones_like(norms)
    scale[over] = clip_norm / norms[over]
    return x * scale[:, None], over


def noise_std(
    clip_norm: float,
    noise_multiplier: float,
    weights: object,
    placement: NoisePlacement = "aggregate",
) -> float:
    """Standard deviation, per coordinate, of the noise in a cluster's averaged update.

    ``weights`` are the aggregation weights ``p_i`` (they must sum to 1).
    ``"aggregate"``: ``z C max_i p_i``; ``"client"``: ``z C sqrt(sum_i p_i²)``.

    >>> noise_std(2.0, 1.5, [0.25, 0.25, 0.25, 0.25])  # z C / 4
    0.75
    """
    checks.check_positive("clip_norm", clip_norm)
    checks.check_nonnegative("noise_multiplier", noise_multiplier)
    checks.check_choice("noise_placement", placement, NOISE_PLACEMENTS)
    p = np.asarray(weights, dtype=np.float64)
    if p.ndim != 1 or p.size == 0 or np.any(~np.isfinite(p)) or np.any(p < 0):
        raise ConfigError(f"weights must be a non-empty vector of values >= 0, got {p!r}")
    if abs(p.sum() - 1) > 1e-9:
        raise ConfigError(f"weights must sum to 1, got {p.sum():g}")
    if placement == "aggregate":
        return float(noise_multiplier * clip_norm * p.max())
    return float(noise_multiplier * clip_norm * np.sqrt(np.sum(p**2)))


@dataclasses.dataclass(frozen=True)
class NoisyAggregate:
    """A cluster's averaged update (Algorithm 1 line 34), the per-coordinate standard
    deviation of the noise it carries (0 without noise), and which clients were clipped."""

    update: np.ndarray
    noise_std: float
    clipped: np.ndarray


def aggregate_cluster(
    updates: object,
    data_sizes: object = None,
    *,
    clip_norm: float | None = None,
    noise_multiplier: float = 0.0,
    placement: NoisePlacement = "aggregate",
    rng: np.random.Generator | int | None = None,
    client_ids: ClientIds = None,
) -> NoisyAggregate:
    """Algorithm 1 lines 26-36 for one cluster: clip (optional), add Gaussian noise
    (optional, see ``placement``), and take the data-size weighted average.

    Parameters
    ----------
    updates
        The members' updates, ``(clients, parameters)`` or one entry per client.
    data_sizes
        Local dataset sizes (``None``: equal weights).
    clip_norm
        L2 bound ``C`` (``None``: no clipping; required when ``noise_multiplier > 0``).
    noise_multiplier
        ``z >= 0``; ``0`` adds no noise.
    placement
        ``"aggregate"`` or ``"client"`` (module docstring).
    rng
        A ``numpy.random.Generator`` or a seed; required when noise is added, so that the same
        seed gives the same noise. ``"aggregate"`` draws one vector of ``N(0, σ²)``;
        ``"client"`` draws a ``(clients, parameters)`` matrix of ``N(0, (zC)²)`` in one call.
    """
    checks.check_nonnegative("noise_multiplier", noise_multiplier)
    checks.check_choice("noise_placement", placement, NOISE_PLACEMENTS)
    if clip_norm is not None:
        checks.check_positive("clip_norm", clip_norm)
    if noise_multiplier > 0 and clip_norm is None:
        raise ConfigError(
            "--noise-multiplier needs --clip-norm: the Gaussian noise is z times the "
            "clipping bound (the paper gives none; choose one, e.g. a median update norm)"
        )
    if noise_multiplier > 0 and rng is None:
        raise ConfigError("noise needs rng (a numpy Generator or a seed) to be reproducible")
    x = update_matrix(updates, client_ids)
    p = weights_from_sizes(data_sizes, len(x))
    clipped = np.zeros(len(x), dtype=bool)
    if clip_norm is not None:
        x, clipped = clip_updates(x, clip_norm)
    if noise_multiplier == 0:
        return NoisyAggregate(p @ x, 0.0, clipped)
    generator = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    std = noise_std(clip_norm, noise_multiplier, p, placement)
    if placement == "client":
        noisy = x + generator.normal(0.0, noise_multiplier * clip_norm, size=x.shape)
        return NoisyAggregate(p @ noisy, std, clipped)
    return NoisyAggregate(p @ x + generator.normal(0.0, std, size=x.shape[1]), std, clipped)
