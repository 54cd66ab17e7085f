"""Each pipeline method's Phase-3 mask policy, registered against its configuration class in
:data:`fedprune.configs.pipeline.MASK_POLICIES` (a method whose configuration only changes
defaults, e.g. Global-FT, runs with its parent's): CA-AFP's prune-and-heal (Eq. 8-11), none for
FedCHAR (dense), EfficientFL's magnitude and FedSNIP's connection sensitivity, each set once.
A factory takes the method's configuration and returns a
:class:`~fedprune.algorithms.pipeline.policy.MaskPolicy`.
"""

from __future__ import annotations

from collections.abc import Callable

from fedprune.algorithms import efficientfl, fedsnip
from fedprune.algorithms.caafp import prune_and_heal
from fedprune.algorithms.pipeline.policy import MaskPolicy
from fedprune.configs.pipeline import (
    MASK_POLICIES,
    EfficientFLConfig,
    FedCHARConfig,
    FedSNIPConfig,
    PipelineConfig,
)

POLICIES: dict[type, Callable[[PipelineConfig], MaskPolicy] | None] = {
    PipelineConfig: prune_and_heal.policy,  # CA-AFP, Global-FT
    FedCHARConfig: None,  # dense
    EfficientFLConfig: efficientfl.policy,
    FedSNIPConfig: fedsnip.policy,
}

for _config_class, _factory in POLICIES.items():
    MASK_POLICIES.register(_config_class, _factory)


def policy_of(config: PipelineConfig) -> MaskPolicy | None:
    """``config``'s mask policy (:meth:`~fedprune.configs.pipeline.PipelineConfig.policy`):
    ``None`` for a dense method or when T2 = 0."""
    return config.policy()
