"""TEMPORARY during issue 15: re-exports the pre-refactoring pipeline (being dissolved)."""

from fedprune.algorithms.pipeline.old_pipeline import *  # noqa: F401,F403
from fedprune.algorithms.pipeline.old_pipeline import (  # noqa: F401
    PAPER_SCORE_WEIGHTS,
    PipelineConfig,
    run_pipeline,
    update_masks,
)
