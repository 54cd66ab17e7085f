"""A clipped, noised mean through TFF's DP aggregator: ``DifferentiallyPrivateFactory.
gaussian_fixed`` (TF Privacy's Gaussian sum query, normalized by the number of records) over
flattened vectors. AS-CFL's noisy intra-cluster aggregation (Algorithm 1 lines 26-36, §3.5)
averages a cluster's members with it; the noisy clustering upload
(:mod:`fedprune.privacy.local`) runs it on one client's vector at a time.

Each member's update is clipped to L2 norm ``C``, the clipped updates are summed, Gaussian
noise ``N(0, (z C)²)`` is added to the sum once, and the sum is divided by the number of
members: the noise on the cluster's mean update has standard deviation ``z C / n``, the
``"aggregate"`` placement of :mod:`fedprune.algorithms.ascfl.noisy_aggregation` with equal
weights. The (ε, δ) of a run is :func:`fedprune.privacy.accounting.privacy_spent` with the
same ``z`` (the mean's sensitivity to one client's clipped update is ``C / n``).

Readings and their costs (also in docs/ascfl.md):

* **Equal weights inside a noisy cluster.** §3.4 weighs each member by its data size, but the
  sensitivity of a weighted mean is ``C max_i p_i`` and TFF's DP factory, like DP-FedAvg, takes
  the unweighted mean. With noise on, members count equally; without noise the data-size
  weighted average of AS-CFL's noisy aggregation stays (numpy, on the server).
* **Noise is not reproducible from the seed.** TF Privacy draws it from an unseeded Gaussian:
  noise that anyone could regenerate from a known seed could be subtracted again. With noise
  on, two runs of the same seed differ in the noise (and everything that follows from it);
  without noise, the same seed gives the same results as always.
* One process per (parameters, members, C, z) is built once and reused; each call starts from
  its initial state (the query's state does not change between calls: fixed clip and noise).
"""

from __future__ import annotations

import functools

import numpy as np
import tensorflow_federated as tff

from fedprune import checks
from fedprune.engine.rounds import call_interruptibly


@functools.lru_cache(maxsize=64)
def _process(
    parameters: int, members: int, clip_norm: float, noise_multiplier: float
) -> tff.templates.AggregationProcess:
    factory = tff.aggregators.DifferentiallyPrivateFactory.gaussian_fixed(
        noise_multiplier=noise_multiplier, clients_per_round=members, clip=clip_norm
    )
    return factory.create(tff.TensorType(np.float32, [parameters]))


def dp_mean(updates: np.ndarray, clip_norm: float, noise_multiplier: float) -> np.ndarray:
    """The clipped, noised mean of ``updates`` (members, parameters) through TFF's DP
    aggregator; float64 (parameters,)."""
    checks.check_positive("clip_norm", clip_norm)
    checks.check_nonnegative("noise_multiplier", noise_multiplier)
    x = np.asarray(updates, dtype=np.float32)
    members, parameters = x.shape
    process = _process(parameters, members, float(clip_norm), float(noise_multiplier))
    state = call_interruptibly(process.initialize)
    output = call_interruptibly(lambda: process.next(state, list(x)))
    return np.asarray(output.result, dtype=np.float64)
