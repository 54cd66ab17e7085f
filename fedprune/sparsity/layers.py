"""Which weights are prunable: tfmot's prune registry, and ``PrunableLayer`` for your own layers.

A layer's prunable weights are those tfmot would prune
(:class:`tfmot.sparsity.keras.PrunableLayer`'s ``get_prunable_weights()`` for a custom layer,
else ``tfmot``'s prune registry: the kernels of Conv and Dense layers, the pointwise kernel of
SeparableConv, the kernels of recurrent cells, nothing of normalization and pooling layers);
biases stay dense (they are 166 of the HAR CNN's 89,254 parameters and carry per-unit offsets
that pruning would turn into hard zeros). A layer with weights the registry does not know, or
knows with nothing prunable, stays dense: :func:`dense_layers` names those layers, and a run
records them in ``summary.json`` (``dense_layers``). :func:`scope_flags` restricts the
prunable kernels to named layers (``--prune-layers``).

This is the one definition of "prunable kernel": every list of per-weight flags comes from
:func:`prunable_mask_flags` (of a model) or :func:`kernel_flags` (of a model spec, cached),
and :func:`select` / :func:`merge` go between all trainable weights and the kernels alone.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import tensorflow as tf
import tensorflow_model_optimization as tfmot
from tensorflow_model_optimization.python.core.sparsity.keras.prune_registry import PruneRegistry

from fedprune.checks import check_layer_names


def prunable_weight_names(layer: tf.keras.layers.Layer) -> tuple[str, ...]:
    """The names (``kernel``, ``pointwise_kernel``, ...) of ``layer``'s prunable weights."""
    if isinstance(layer, tfmot.sparsity.keras.PrunableLayer):
        return tuple(_short(w.name) for w in layer.get_prunable_weights())
    if not PruneRegistry.supports(layer):
        return ()
    if PruneRegistry._is_rnn_layer(layer):  # noqa: SLF001 (the registry's own test)
        cells = PruneRegistry._get_rnn_cells(layer)  # noqa: SLF001
        table = PruneRegistry._RNN_CELLS_WEIGHTS_MAP  # noqa: SLF001
        return tuple(n for cell in cells for n in table.get(cell.__class__, ()))
    if layer.__class__ in PruneRegistry._LAYERS_WEIGHTS_MAP:  # noqa: SLF001
        return tuple(PruneRegistry._weight_names(layer))  # noqa: SLF001
    return ()  # supported by tfmot through a rule fedprune does not read (attention): dense


def _short(name: str) -> str:
    return name.split("/")[-1].split(":")[0]


def prunable_mask_flags(model: tf.keras.Model) -> list[bool]:
    """For each of ``model.trainable_weights``, whether it is a prunable kernel."""
    flags = []
    for layer in model.layers:
        names = prunable_weight_names(layer)
        flags.extend(_short(w.name) in names for w in layer.trainable_weights)
    if len(flags) != len(model.trainable_weights):
        raise ValueError("trainable weights are not all owned by the model's top-level layers")
    return flags


def dense_layers(model: tf.keras.Model) -> list[str]:
    """The layers with trainable weights of which none is prunable (kept dense)."""
    return [
        layer.name
        for layer in model.layers
        if layer.trainable_weights
        and not any(_short(w.name) in prunable_weight_names(layer) for w in layer.trainable_weights)
    ]


def scope_flags(model: tf.keras.Model, layers: Sequence[str] | None = None) -> list[bool]:
    """:func:`prunable_mask_flags` restricted to the kernels of the layers named in ``layers``
    (``None``: all prunable kernels)."""
    flags = prunable_mask_flags(model)
    if layers is None:
        return flags
    owners = [layer.name for layer in model.layers for _ in layer.trainable_weights]
    check_layer_names(layers, [n for n, f in zip(owners, flags) if f])
    return [f and n in layers for n, f in zip(owners, flags)]


def select(values: Sequence[np.ndarray], flags: Sequence[bool]) -> list[np.ndarray]:
    """The ``values`` whose flag is True (e.g. the prunable kernels among all weights)."""
    if len(values) != len(flags):
        raise ValueError(f"{len(values)} values but {len(flags)} flags")
    return [np.asarray(v) for v, f in zip(values, flags) if f]


def merge(
    kernel_masks: Sequence[np.ndarray], like: Sequence[np.ndarray], flags: Sequence[bool]
) -> list[np.ndarray]:
    """A list shaped like ``like``: ``kernel_masks`` in order where the flag is True, float32
    ones where it is False (an unpruned tensor's mask). The inverse of :func:`select` on masks.
    """
    if len(like) != len(flags):
        raise ValueError(f"{len(like)} tensors but {len(flags)} flags")
    if len(kernel_masks) != sum(bool(f) for f in flags):
        raise ValueError(f"{len(kernel_masks)} masks for {sum(bool(f) for f in flags)} kernels")
    it = iter(kernel_masks)
    return [next(it) if f else np.ones_like(w, np.float32) for w, f in zip(like, flags)]


class _BuildsKeras(Protocol):
    def keras(self) -> tf.keras.Model: ...


@functools.lru_cache(maxsize=32)
def _cached_flags(spec: _BuildsKeras) -> tuple[bool, ...]:
    return tuple(prunable_mask_flags(spec.keras()))


def kernel_flags(spec: _BuildsKeras) -> list[bool]:
    """:func:`prunable_mask_flags` of ``spec.keras()`` (a :mod:`fedprune.models.spec` spec),
    built once per spec and process: flags depend only on the architecture."""
    return list(_cached_flags(spec))
