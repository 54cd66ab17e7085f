"""The pipeline methods by name: config factory and mask policy, and one runner for all.

``METHODS[name] = (config factory, policy factory or None)``; a dense method (FedCHAR) has no
mask policy and must have T2 = 0 (checked by the pipeline).
"""

from __future__ import annotations

from pathlib import Path

from fedprune.algorithms.caafp import PruneAndHeal, caafp_config
from fedprune.algorithms.efficientfl import efficientfl_config, efficientfl_policy
from fedprune.algorithms.fedchar import fedchar_config
from fedprune.algorithms.fedsnip import fedsnip_config, fedsnip_policy
from fedprune.algorithms.global_ft import global_ft_config
from fedprune.algorithms.pipeline import PipelineConfig, run_pipeline
from fedprune.errors import ConfigError

METHODS = {
    "caafp": (caafp_config, PruneAndHeal),
    "global_ft": (global_ft_config, PruneAndHeal),
    "fedchar": (fedchar_config, None),
    "efficientfl": (efficientfl_config, efficientfl_policy),
    "fedsnip": (fedsnip_config, fedsnip_policy),
}


def run_method(
    config: PipelineConfig,
    out: str | Path,
    data_dir: str | Path | None = None,
    progress: bool = True,
) -> dict:
    """Train (or resume, or return the finished) run of ``config.method`` in ``out``."""
    if config.method not in METHODS:
        raise ConfigError(f"unknown method {config.method!r}; known: {', '.join(METHODS)}")
    config = config.resolved()
    policy = METHODS[config.method][1]
    return run_pipeline(config, policy(config) if policy else None, out, data_dir, progress)
