"""Which kernels the pipeline prunes (``--prune-layers``), and the checks that a layerwise
budget can prune them and that ``--block`` fits them.

Interpretation: a layerwise budget is refused for a chosen kernel that would have to lose
whole output units (:func:`fedprune.sparsity.masks.starves_units`, e.g. the classifier with
``block=16``), before a new run's ``config.json`` is written.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from fedprune.checks import check_at_most
from fedprune.errors import ConfigError
from fedprune.sparsity import masks as M


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
