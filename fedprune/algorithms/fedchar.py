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

from fedprune.algorithms.pipeline import PipelineConfig


def fedchar_config(dataset: str, **overrides: object) -> PipelineConfig:
    defaults = dict(phases=(10, 40, 0), clusters=3, start_sparsity=0.0, target_sparsity=0.0)
    return PipelineConfig(dataset=dataset, method="fedchar", **{**defaults, **overrides})
