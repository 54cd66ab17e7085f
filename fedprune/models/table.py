"""The model table: every model fedprune trains, by name, without importing TensorFlow.

One :class:`ModelEntry` per model: its builder as a ``"module:function"`` string resolved
on first use (so the command line and the configurations can validate ``--prune-layers``
against :attr:`ModelEntry.kernel_layers` without the ~2 s TensorFlow import), a one-line
description, and the names of the layers whose kernels are prunable, in model order (the
Conv and Dense layers: :func:`fedprune.sparsity.layers.prunable_weight_names`;
tests/models/test_table.py checks them against the built models).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from fedprune.errors import ConfigError
from fedprune.lazy import resolve


@dataclasses.dataclass(frozen=True)
class ModelEntry:
    """One model: ``builder`` is ``"module:function"``, imported by :meth:`build_function`."""

    name: str
    builder: str
    description: str
    kernel_layers: tuple[str, ...]
    task: str  # "classification" (windows -> class probabilities) or "reconstruction"

    def build_function(self) -> Callable:
        """The builder function (imports its module, and so TensorFlow, on first call)."""
        return resolve(self.builder)

    def build(self, *args: object, **kwargs: object) -> object:
        """``builder(*args, **kwargs)``: an uncompiled Keras model."""
        return self.build_function()(*args, **kwargs)


MODELS: dict[str, ModelEntry] = {
    entry.name: entry
    for entry in (
        ModelEntry(
            "har_cnn",
            "fedprune.models.cnn1d:build_har_cnn",
            "CA-AFP's HAR 1D-CNN classifier: 2 x (Conv1D 64, pool, dropout), Dense 32, softmax",
            ("conv1", "conv2", "dense", "probs"),
            "classification",
        ),
        ModelEntry(
            "har_cnn_small",
            "fedprune.models.cnn1d_small:build_har_cnn_small",
            "small HAR 1D-CNN for microcontrollers (~4.9 k params): 3 x Conv1D 8/16/32, "
            "global average, Dense 32, softmax",
            ("conv1", "conv2", "conv3", "dense", "probs"),
            "classification",
        ),
        ModelEntry(
            "autoencoder",
            "fedprune.models.autoencoder:build_autoencoder",
            "FedCRef's dense autoencoder d-100-64-32-64-100-d (ReLU, sigmoid output)",
            ("dense1", "dense2", "dense3", "dense4", "dense5", "reconstruction"),
            "reconstruction",
        ),
        ModelEntry(
            "image_cnn",
            "fedprune.models.cnn2d:build_image_cnn",
            "AS-CFL image CNN (ours, ~0.35 M params): 2 x (Conv2D 5x5 32/64, pool), Dense 96",
            ("conv1", "conv2", "dense", "probs"),
            "classification",
        ),
        ModelEntry(
            "image_cnn_small",
            "fedprune.models.cnn2d:build_image_cnn_small",
            "small image CNN (51 k params): 2 x (Conv2D 5x5 16/32, pool), Dense 24, softmax",
            ("conv1", "conv2", "dense", "probs"),
            "classification",
        ),
    )
}


def model_entry(name: str) -> ModelEntry:
    """The table entry named ``name``; an unknown name is a ConfigError listing the known."""
    if name not in MODELS:
        raise ConfigError(
            f"unknown model {name!r}; the known models are {', '.join(sorted(MODELS))}"
        )
    return MODELS[name]
