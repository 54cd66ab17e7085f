"""The interface between the pipeline and an algorithm's mask rule (Phase 3, Eq. 7).

A :class:`MaskPolicy` says which Phase-3 rounds collect score statistics and what the new
kernel masks are after such a round. :func:`update_masks` hands it only the kernels it prunes
(``--prune-layers``) and gives every other weight mask 1.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import numpy as np

from fedprune.errors import ConfigError
from fedprune.sparsity.layers import merge, select
from fedprune.sparsity.structured import StructuredMasks


class MaskPolicy(Protocol):
    """How an algorithm sets a cluster's mask in Phase 3 (T2 rounds)."""

    def scoring_round(self, t: int) -> bool:
        """Whether Phase-3 round ``t`` (1-based) collects statistics for a mask update."""

    def update(
        self,
        t: int,
        broadcast: list[np.ndarray],
        aggregated: list[np.ndarray],
        masks: list[np.ndarray],
        stats: dict[str, list[np.ndarray]],
    ) -> list[np.ndarray]:
        """New kernel masks after scoring round ``t``. All lists hold prunable kernels only:
        ``broadcast`` the round's starting model, ``aggregated`` its result, ``stats`` the
        federated means ``w``, ``w2``, ``grad_sign``, ``grad``."""


def with_structure(policy: MaskPolicy, method: str, structured: StructuredMasks) -> MaskPolicy:
    """``policy`` removing whole filters and units (``--structure filters``): a policy
    dataclass with a ``structured`` field (CA-AFP's prune-and-heal, the prune-once baselines)
    takes ``structured``; any other is one ConfigError line."""
    takes = dataclasses.is_dataclass(policy) and any(
        f.name == "structured" for f in dataclasses.fields(policy)
    )
    if not takes:
        raise ConfigError(
            f"--structure filters: {method}'s mask policy ({type(policy).__name__}) prunes "
            "single weights only; leave --structure out"
        )
    return dataclasses.replace(policy, structured=structured)


def update_masks(
    policy: MaskPolicy,
    t: int,
    broadcast: list[np.ndarray],
    aggregated: list[np.ndarray],
    masks: list[np.ndarray],
    statistics: dict[str, list[np.ndarray]],
    scope: list[bool],
) -> list[np.ndarray]:
    """New masks of all trainable weights after scoring round ``t``: the policy sees only the
    weights marked in ``scope`` (the chosen kernels; all lists are over all trainable weights),
    every other weight gets mask 1."""
    kernels = policy.update(
        t,
        select(broadcast, scope),
        select(aggregated, scope),
        select(masks, scope),
        {k: select(v, scope) for k, v in statistics.items()},
    )
    return merge(kernels, aggregated, scope)
