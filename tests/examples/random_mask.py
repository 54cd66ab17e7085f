"""A tiny example method, as docs/adding-a-method.md describes: random one-shot pruning.

A sanity baseline for the pruned methods: after the first (dense) round, a mask at the target
sparsity chosen uniformly at random (seeded by the run's seed), fixed for the other rounds,
then the shared masked fine-tuning. It is the pipeline with a new mask policy, so it takes
one configuration class naming its policy, the policy, and one registry entry
(:data:`REGISTRY_ENTRY`, which the test adds to :data:`fedprune.methods.METHODS`).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from fedprune.configs.pipeline import EfficientFLConfig, override
from fedprune.methods import Method


# 1. the configuration: EfficientFL's one-shot defaults (K = 1, 70 %), another method name,
#    and the mask policy it trains with
@dataclasses.dataclass(frozen=True)
class RandomMaskConfig(EfficientFLConfig):
    """Random one-shot pruning to ``target_sparsity`` after round 1, K = 1."""

    POLICY: ClassVar[str | None] = "tests.examples.random_mask:policy"
    method: str = override("method", "random_mask")


# 2. the policy: prune once, by scores drawn at random from the run's seed
def policy(config: RandomMaskConfig):  # noqa: ANN201 (a PruneOnce)
    """Random scores, pruned once to the target sparsity after round 1."""
    from fedprune.algorithms.oneshot import PruneOnce

    rng = np.random.default_rng([config.seed, 7])

    def random_scores(broadcast, aggregated, stats):  # noqa: ANN001, ANN202
        return [rng.random(w.shape) for w in aggregated]

    return PruneOnce.from_config(config, random_scores)


# 3. the registry line (in fedprune/methods.py for a real method): the pipeline's runner
REGISTRY_ENTRY = Method(
    "random_mask",
    "random one-shot mask (a sanity baseline)",
    "Prunes to --target-sparsity at random after the first round; then fine-tuning.",
    RandomMaskConfig,
    "fedprune.algorithms.pipeline.compose:run_method",
    "fedprune.algorithms.pipeline.compose:finetune_start",  # its runs can be fine-tuned again
    data="windows",  # it takes your own windows and model through the Python API too
)
