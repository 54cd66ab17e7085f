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

from pathlib import Path

import numpy as np

from fedprune.algorithms.oneshot import run_pruned_once
from fedprune.configs.pipeline import PipelineConfig
from fedprune.models.user import UserModel


def magnitude_scores(
    broadcast: list[np.ndarray], aggregated: list[np.ndarray], stats: dict[str, list[np.ndarray]]
) -> list[np.ndarray]:
    """|w| of the aggregated model after the first round."""
    return [np.abs(w) for w in aggregated]


def run_efficientfl(
    config: PipelineConfig,
    out: str | Path,
    data_dir: str | Path | None = None,
    progress: bool = True,
    model: UserModel | None = None,
) -> dict:
    """Train (or resume, or return the finished) efficientfl run in ``out``; returns the summary."""
    return run_pruned_once(config, magnitude_scores, out, data_dir, progress, model)
