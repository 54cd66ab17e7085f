"""The FedCRef autoencoder (FedCRef paper, Section 5.3 and Table 2).

Fully connected encoder d-100-64-32 and symmetric decoder 32-64-100-d with ReLU hidden
layers, a sigmoid output, no dropout: 174,840 parameters for d = 784 (the paper's count).
Trained with Adam on the mean squared reconstruction error.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from fedprune.sparsity.layers import kernel_flags, select

HIDDEN = (100, 64, 32, 64, 100)


def build_autoencoder(
    input_dim: int = 784, hidden: tuple[int, ...] = HIDDEN, seed: int | None = None
) -> tf.keras.Model:
    """The paper's autoencoder (uncompiled); ``seed`` fixes the initial weights."""
    inputs = tf.keras.Input(shape=(input_dim,), name="image")
    h = inputs
    for k, units in enumerate(hidden):
        h = tf.keras.layers.Dense(
            units,
            activation="relu",
            kernel_initializer=tf.keras.initializers.GlorotUniform(
                None if seed is None else seed + k
            ),
            name=f"dense{k + 1}",
        )(h)
    outputs = tf.keras.layers.Dense(
        input_dim,
        activation="sigmoid",
        kernel_initializer=tf.keras.initializers.GlorotUniform(
            None if seed is None else seed + len(hidden)
        ),
        name="reconstruction",
    )(h)
    return tf.keras.Model(inputs, outputs, name="fedcref_autoencoder")


def dense_layers(weights: Sequence[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
    """(kernel, bias) of each Dense layer of :func:`build_autoencoder`'s Keras ``weights``:
    the kernels are its prunable tensors (:func:`fedprune.sparsity.layers.kernel_flags`),
    the biases the others, both in layer order."""
    from fedprune.models.spec import AutoencoderSpec  # the spec resolves this module's builder

    flags = kernel_flags(AutoencoderSpec(int(np.shape(weights[0])[0]), seed=0))
    kernels = select(weights, flags)
    biases = select(weights, [not f for f in flags])
    return list(zip(kernels, biases, strict=True))


def reconstruction_errors(
    weights: list[np.ndarray], x: np.ndarray, chunk: int = 8192
) -> np.ndarray:
    """Per-sample MSE of the autoencoder with Keras ``weights`` on ``x`` ([n, d]), in numpy.

    The forward pass of :func:`build_autoencoder` (kernel, bias pairs; ReLU, then sigmoid),
    done in float32 matrix products in chunks: evaluating many small models on many samples
    this way avoids building a Keras model per evaluation.
    """
    x = np.asarray(x, np.float32)
    out = np.empty(len(x), np.float32)
    pairs = dense_layers(weights)
    for start in range(0, len(x), chunk):
        h = x[start : start + chunk]
        for k, (kernel, bias) in enumerate(pairs):
            h = h @ kernel + bias
            if k < len(pairs) - 1:
                np.maximum(h, 0.0, out=h)
        h = 1.0 / (1.0 + np.exp(-h))
        out[start : start + chunk] = np.mean(np.square(h - x[start : start + chunk]), axis=1)
    return out
