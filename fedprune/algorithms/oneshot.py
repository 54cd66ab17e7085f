"""Mask policies that prune once, after the first Phase-3 round, and keep the mask fixed.

Used by the pruned baselines (:mod:`fedsnip`, :mod:`efficientfl`): they differ only in the
score. The first round trains dense; its statistics (gradients at the initial weights, the
aggregated model) give the scores; the mask is applied from the second round on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from fedprune.configs.pipeline import PipelineConfig
from fedprune.sparsity import masks as M
from fedprune.sparsity.structured import StructuredMasks

Score = Callable[
    [list[np.ndarray], list[np.ndarray], dict[str, list[np.ndarray]]], list[np.ndarray]
]


@dataclasses.dataclass(frozen=True)
class PruneOnce:
    """Prune to ``target`` by ``score(broadcast, aggregated, stats)`` after round 1;
    ``structured``: whole filters and units by their weights' mean score (``--structure
    filters``, :mod:`fedprune.sparsity.structured`)."""

    score: Score
    target: float
    block: int = 1
    budget: str = "global"
    structured: StructuredMasks | None = None

    @classmethod
    def from_config(cls, config: PipelineConfig, score: Score) -> PruneOnce:
        """``score`` at the configuration's target sparsity, mask unit and budget."""
        return cls(score, config.target_sparsity, config.block, config.budget)

    def scoring_round(self, t: int) -> bool:
        return t == 1

    def update(
        self,
        t: int,
        broadcast: list[np.ndarray],
        aggregated: list[np.ndarray],
        masks: list[np.ndarray],
        stats: dict[str, list[np.ndarray]],
    ) -> list[np.ndarray]:
        scores = self.score(broadcast, aggregated, stats)
        if self.structured is not None:
            return self.structured.prune_to(masks, scores, self.target)
        return M.prune_to(masks, scores, self.target, self.block, self.budget)
