"""Communication accounting: the paper's Eq. 13 and the bytes of an encoded sparse payload.

Eq. 13 counts every transfer (download and upload, per participating client) as the dense
parameter count x (1 - sparsity) x 4 bytes, i.e. 4 bytes per non-zero parameter.

The payload is what a sparse model actually costs when encoded: a bitmask over the prunable
kernels (1 bit per mask unit: a weight, or a block of weights with ``--block``) plus 4-byte
values of the unmasked kernel weights, plus the dense never-pruned tensors (biases); a model
is sent dense when that is smaller.
"""

from __future__ import annotations


def eq13_bytes(n_params: int, sparsity: float) -> float:
    """Eq. 13 bytes of one transfer of a model with ``n_params`` parameters."""
    if not 0.0 <= sparsity <= 1.0:
        raise ValueError(f"sparsity must be in [0, 1], got {sparsity}")
    return n_params * (1.0 - sparsity) * 4.0


def payload_bytes(
    n_params: int, n_prunable: int, n_active_prunable: int, n_units: int | None = None
) -> int:
    """Bytes of one bitmask + values encoding (or dense, whichever is smaller).

    ``n_units`` is the number of mask units (default: one per prunable weight).
    """
    if not 0 <= n_active_prunable <= n_prunable <= n_params:
        raise ValueError("need 0 <= active <= prunable <= params")
    units = n_prunable if n_units is None else n_units
    dense = 4 * n_params
    sparse = -(-units // 8) + 4 * n_active_prunable + 4 * (n_params - n_prunable)
    return min(dense, sparse)
