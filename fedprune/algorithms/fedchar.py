"""FedCHAR baseline (Li et al., clustered personalized HAR; CA-AFP paper's [21]), dense.

Implemented with the shared pipeline: 10 rounds of FedAvg warm-up; hierarchical (average-
linkage) clustering of the clients' update directions by cosine similarity into K = 3 groups;
40 rounds of per-group training with a proximal personalization term towards the warm-up
model; then per-client fine-tuning. No pruning.

Interpretations: the update directions are one local epoch from the warm-up model (the same
clustering step as CA-AFP); the personalization term is the proximal term of Eq. 5 with
lambda = 1e-3; the round budget (50) matches the other methods.
"""

from __future__ import annotations

from pathlib import Path

from fedprune.algorithms.pipeline import run_pipeline
from fedprune.configs.pipeline import PipelineConfig
from fedprune.models.user import UserModel


def run_fedchar(
    config: PipelineConfig,
    out: str | Path,
    data_dir: str | Path | None = None,
    progress: bool = True,
    model: UserModel | None = None,
) -> dict:
    """Train (or resume, or return the finished) FedCHAR run in ``out``; returns the summary."""
    return run_pipeline(config, None, out, data_dir, progress, model)
