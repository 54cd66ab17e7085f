"""Which kernels the pipeline prunes (``--prune-layers``), and the checks that a layerwise
budget can prune them and that ``--block`` fits them; :class:`PrunedKernels` is a run's
choice of them, checked against its model, with the mask policy that prunes them and the
statistics its summary gives of the masks.

Interpretation: a layerwise budget is refused for a chosen kernel that would have to lose
whole output units (:func:`fedprune.sparsity.masks.starves_units`, e.g. the classifier with
``block=16``), before a new run's ``config.json`` is written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import tensorflow as tf

from fedprune.algorithms.pipeline.policy import MaskPolicy, with_structure
from fedprune.checks import check_at_most
from fedprune.configs.pipeline import PipelineConfig
from fedprune.errors import ConfigError
from fedprune.sparsity import masks as M
from fedprune.sparsity import structured as S
from fedprune.sparsity.layers import prunable_mask_flags, scope_flags, select


def kernel_layer_names(model: tf.keras.Model, which: list[bool]) -> list[str]:
    """The layer names of the trainable weights marked in ``which``."""
    owners = [layer.name for layer in model.layers for _ in layer.trainable_weights]
    return [n for n, f in zip(owners, which) if f]


def check_layerwise(
    model: tf.keras.Model,
    scope: list[bool],
    budget: str,
    block: int,
    sparsity: float,
) -> None:
    """Refuse ``budget="layerwise"`` when a kernel in ``scope`` at ``sparsity`` (the highest
    the schedule reaches) in blocks of ``block`` keeps fewer blocks than output units."""
    if budget != "layerwise":
        return
    shapes = [tuple(w.shape) for w, s in zip(model.trainable_weights, scope) if s]
    names = kernel_layer_names(model, scope)
    bad = [n for n, s in zip(names, shapes) if M.starves_units(s, block, sparsity)]
    if bad:
        keep = [n for n in names if n not in bad]
        hint = f"--prune-layers {','.join(keep)}, " if keep else ""
        raise ConfigError(
            f"--budget layerwise with --block {block} at {sparsity:.0%} sparsity would leave "
            f"output units of {', '.join(bad)} without any weight (fewer kept blocks than output "
            f"units); use {hint}a smaller --block, or --budget global"
        )


def check_block(model: tf.keras.Model, scope: list[bool], block: int) -> None:
    """Refuse a ``--block`` longer than every column of the kernels in ``scope``: a block is
    a run of consecutive input weights of one output unit (:mod:`fedprune.sparsity.masks`), so
    beyond the longest column (the largest fan-in) it would be cut short in every kernel and
    mean the same as that length."""
    shapes = [tuple(w.shape) for w, s in zip(model.trainable_weights, scope) if s]
    fan_ins = [int(np.prod(s[:-1])) if len(s) > 1 else 1 for s in shapes]
    if not fan_ins:
        return
    longest = max(fan_ins)
    name = kernel_layer_names(model, scope)[fan_ins.index(longest)]
    check_at_most("block", block, longest, f"the fan-in of {name}, the longest kernel pruned")


@dataclasses.dataclass(frozen=True)
class PrunedKernels:
    """The weights a pipeline run masks: every prunable kernel (``flags``), those its mask
    policy prunes (``scope``, ``--prune-layers``), their layers' names (``names``,
    ``scope_names``), with ``--structure filters`` the model's filters and units (``graph``,
    :mod:`fedprune.sparsity.structured`; else ``None``), and the ``policy`` that sets the
    masks of ``scope`` (``None`` only for dense methods)."""

    flags: list[bool]
    scope: list[bool]
    names: list[str]
    scope_names: list[str]
    graph: S.UnitGraph | None
    policy: MaskPolicy | None

    @classmethod
    def checked(
        cls, model: tf.keras.Model, config: PipelineConfig, policy: MaskPolicy | None
    ) -> PrunedKernels:
        """The kernels ``config`` prunes in ``model`` with ``policy``, after the checks that it
        can: ``--block`` fits them (:func:`check_block`); then with ``--structure filters``
        the policy must remove whole filters and units
        (:func:`~fedprune.algorithms.pipeline.policy.with_structure`), else, where Phase 3
        runs, a layerwise budget must leave every output unit a weight at the schedule's
        highest sparsity (:func:`check_layerwise`). One ConfigError line, in that order."""
        flags = prunable_mask_flags(model)
        scope = scope_flags(model, config.prune_layers)
        check_block(model, scope, config.block)
        graph = None
        if config.structure == "filters":
            graph = S.unit_graph(model, scope)
            structured = S.StructuredMasks(graph, config.budget)
            policy = with_structure(policy, config.method, structured)
        elif config.phases[2] > 0:
            sparsity = max(config.start_sparsity, config.target_sparsity)
            check_layerwise(model, scope, config.budget, config.block, sparsity)
        names, scope_names = kernel_layer_names(model, flags), kernel_layer_names(model, scope)
        return cls(flags, scope, names, scope_names, graph, policy)

    def kernel_masks(
        self, masks: Mapping[int, Sequence[np.ndarray]]
    ) -> dict[int, list[np.ndarray]]:
        """Each cluster's masks of all trainable weights (``masks``) cut to the prunable
        kernels (what ``masks.npz`` holds)."""
        return {c: select(m, self.flags) for c, m in masks.items()}

    def summary(
        self,
        masks: Mapping[int, Sequence[np.ndarray]],
        cluster_of: Mapping[int, int],
        weights: Sequence[np.ndarray],
    ) -> dict:
        """The summary's statistics of the clusters' final ``masks`` (of all trainable
        weights; ``cluster_of``: each client's cluster; ``weights``: the model's): each
        cluster's ``cluster_sparsity`` over all prunable kernels, the pruned layers
        (``prune_layers``) and their number of weights (``pruned_params``), the clients' mean
        sparsity of those (``sparsity_pruned_layers``), each cluster's sparsity per kernel
        (``layer_sparsity``), and with ``--structure filters`` the filters and units removed
        (:func:`fedprune.sparsity.structured.summary`)."""
        kernel_masks, scope = self.kernel_masks(masks), self.scope
        per_client = [M.sparsity(select(masks[c], scope)) for c in cluster_of.values()]
        return {
            "cluster_sparsity": {str(c): M.sparsity(m) for c, m in kernel_masks.items()},
            "prune_layers": self.scope_names,
            "pruned_params": int(sum(w.size for w in select(weights, scope))),
            "sparsity_pruned_layers": float(np.mean(per_client)),
            "layer_sparsity": {
                str(c): {n: M.sparsity([k]) for n, k in zip(self.names, m)}
                for c, m in kernel_masks.items()
            },
            **(
                {}
                if self.graph is None
                else S.summary(self.graph, {c: select(m, scope) for c, m in masks.items()})
            ),
        }
