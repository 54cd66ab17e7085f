"""EfficientFL baseline: a winning sparse subnetwork chosen early, then only it is trained and
transmitted (CA-AFP paper's [29]; "pruning-based compression of client models/updates").

Implemented: after the first (dense) federated round, the aggregated model's weights are ranked
by magnitude |w| over all prunable kernels and the lowest 70 % are removed; the mask stays fixed
for the remaining rounds, so every later transfer is 30 % dense; no clustering (K = 1), no
proximal term; then the shared masked fine-tuning.

Not implemented: quantization of the transmitted values (the paper's description mentions it;
Eq. 13 counts 4 bytes per value for every method, so leaving it out keeps the comparison on the
paper's accounting).
"""

from __future__ import annotations

import numpy as np

from fedprune.algorithms.oneshot import PruneOnce
from fedprune.configs.pipeline import PipelineConfig


def magnitude_scores(
    broadcast: list[np.ndarray], aggregated: list[np.ndarray], stats: dict[str, list[np.ndarray]]
) -> list[np.ndarray]:
    """|w| of the aggregated model after the first round."""
    return [np.abs(w) for w in aggregated]


def policy(config: PipelineConfig) -> PruneOnce:
    """EfficientFL's mask policy: magnitude, once, at ``config.target_sparsity``."""
    return PruneOnce.from_config(config, magnitude_scores)
