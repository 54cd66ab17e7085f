"""A tiny example method, as docs/adding-a-method.md describes: random one-shot pruning.

A sanity baseline for the pruned methods: after the first (dense) round, a mask at the target
sparsity chosen uniformly at random (seeded by the run's seed), fixed for the other rounds,
then the shared masked fine-tuning. It is the pipeline with a new mask policy, so it takes
one configuration class, one runner and one registry entry (:data:`REGISTRY_ENTRY`, which
the test adds to :data:`fedprune.methods.METHODS`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from fedprune.configs.pipeline import EfficientFLConfig, override
from fedprune.methods import Method


# 1. the configuration: EfficientFL's one-shot defaults (K = 1, 70 %), another method name
@dataclasses.dataclass(frozen=True)
class RandomMaskConfig(EfficientFLConfig):
    """Random one-shot pruning to ``target_sparsity`` after round 1, K = 1."""

    method: str = override("method", "random_mask")


# 2. the runner: the shared pipeline with a mask policy that scores weights at random
def run_random_mask(
    config: RandomMaskConfig,
    out: str | Path,
    data_dir: str | Path | None = None,
    progress: bool = True,
) -> dict:
    """Train (or resume, or return the finished) run in ``out``; returns the summary."""
    from fedprune.algorithms.oneshot import run_pruned_once

    rng = np.random.default_rng([config.seed, 7])

    def random_scores(broadcast, aggregated, stats):  # noqa: ANN001, ANN202
        return [rng.random(w.shape) for w in aggregated]

    return run_pruned_once(config, random_scores, out, data_dir, progress)


# 3. the registry line (in fedprune/methods.py for a real method)
REGISTRY_ENTRY = Method(
    "random_mask",
    "random one-shot mask (a sanity baseline)",
    "Prunes to --target-sparsity at random after the first round; then fine-tuning.",
    RandomMaskConfig,
    "tests.examples.random_mask:run_random_mask",
    "fedprune.algorithms.pipeline.compose:finetune_start",  # its runs can be fine-tuned again
)
