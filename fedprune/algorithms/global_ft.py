"""Global-FT: CA-AFP with a single cluster (K = 1), as in the CA-AFP paper's Figures 3-4.

Everything else is CA-AFP's: prune-and-heal from the federated importance scores, then
per-client masked fine-tuning of the one global sparse model.
"""

from __future__ import annotations

from pathlib import Path

from fedprune.algorithms.caafp import PruneAndHeal
from fedprune.algorithms.pipeline import PipelineConfig, run_pipeline


def global_ft_config(dataset: str, **overrides: object) -> PipelineConfig:
    return PipelineConfig(dataset=dataset, method="global_ft", **{"clusters": 1, **overrides})


def run_global_ft(
    config: PipelineConfig,
    out: str | Path,
    data_dir: str | Path | None = None,
    progress: bool = True,
) -> dict:
    config = config.resolved()
    return run_pipeline(config, PruneAndHeal(config), out, data_dir, progress)
