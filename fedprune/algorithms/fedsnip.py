"""FedSNIP baseline: one-shot SNIP pruning in federated learning (CA-AFP paper's [4]).

SNIP (Lee et al. 2019) keeps the connections with the largest sensitivity |g ⊙ w| at
initialization. Federated form used here: the saliency of the federated objective,
|E_k[∂L_k/∂w] ⊙ w_0|, from the clients' mean gradient at the initial weights (a federated
mean inside the first round's TFF computation), one global ranking over all prunable kernels,
one fixed mask at the target sparsity (70 %) for all remaining rounds; no clustering (K = 1),
no proximal term; then the shared masked fine-tuning.

Interpretations: the clients' gradients come from the first round (the round trains dense and
the mask applies from round 2, so one round is sent dense); the mean is unweighted over the
participating clients.
"""

from __future__ import annotations

import numpy as np

from fedprune.algorithms.oneshot import PruneOnce
from fedprune.configs.pipeline import PipelineConfig


def snip_scores(
    broadcast: list[np.ndarray], aggregated: list[np.ndarray], stats: dict[str, list[np.ndarray]]
) -> list[np.ndarray]:
    """|E[g] ⊙ w_0| per weight."""
    return [np.abs(g * w) for g, w in zip(stats["grad"], broadcast)]


def policy(config: PipelineConfig) -> PruneOnce:
    """FedSNIP's mask policy: SNIP saliency, once, at ``config.target_sparsity``."""
    return PruneOnce.from_config(config, snip_scores)
