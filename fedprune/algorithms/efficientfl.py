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

from fedprune.algorithms.oneshot import PruneOnce
from fedprune.algorithms.pipeline import PipelineConfig, run_pipeline


def magnitude_scores(
    broadcast: list[np.ndarray], aggregated: list[np.ndarray], stats: dict[str, list[np.ndarray]]
) -> list[np.ndarray]:
    """|w| of the aggregated model after the first round."""
    return [np.abs(w) for w in aggregated]


def efficientfl_config(dataset: str, **overrides: object) -> PipelineConfig:
    # one fixed mask: no churn, and the schedule frequency is unused (1 always validates)
    defaults = dict(
        phases=(0, 0, 50), clusters=1, prox=0.0, start_sparsity=0.0, churn=0.0, prune_frequency=1
    )
    return PipelineConfig(dataset=dataset, method="efficientfl", **{**defaults, **overrides})


def run_efficientfl(
    config: PipelineConfig,
    out: str | Path,
    data_dir: str | Path | None = None,
    progress: bool = True,
) -> dict:
    config = config.resolved()
    policy = PruneOnce(magnitude_scores, config.target_sparsity, config.block)
    return run_pipeline(config, policy, out, data_dir, progress)
