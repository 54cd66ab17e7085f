"""A HAR 1D-CNN small enough for microcontrollers: ``--model har_cnn_small``.

The paper's model (:mod:`fedprune.models.cnn1d`, 89 k parameters on UCI-HAR) gives a 96.5 KB
int8 file and a 20 KB tensor arena: more than the 32-64 KB of RAM and flash that small
Cortex-M parts have left beside their firmware. This one keeps the paper's pattern (Conv1D
blocks with ReLU and max pooling, a ReLU Dense layer, a softmax output) and spends its
parameters on a third convolution and a global average over time instead of a wide Flatten ->
Dense:

    Conv1D(8, 5) -> MaxPool(2) -> Conv1D(16, 5) -> MaxPool(2) -> Dropout(0.2)
    -> Conv1D(32, 5) -> GlobalAveragePooling1D -> Dense(32) -> Dropout(0.2) -> Dense(classes)

4,870 parameters for (128, 9) windows (UCI-HAR, 6 classes) and 4,630 for (200, 3) (WISDM):
the global average makes the size independent of the window length. The first layers are
narrow because their outputs, the longest tensors, set the arena; about 9 KB of an int8 file
is the flatbuffer's own structure (tensor names, quantization parameters), so the weights get
about 5 KB of the 16 KB budget. Its int8 file and arena
are measured in docs/edge-export.md ("A model for small chips"), beside its accuracy cost
against the paper's model. Not from any paper: a design of ours, chosen for the size budget
(int8 <= 16 KB, arena <= 8 KB), not tuned on test data.
"""

from __future__ import annotations

import tensorflow as tf

from fedprune.models.cnn1d import MaskConstraint


def build_har_cnn_small(
    input_shape: tuple[int, int],
    num_classes: int = 6,
    seed: int | None = None,
    masked: bool = False,
) -> tf.keras.Model:
    """Build the small HAR 1D-CNN (uncompiled); ``seed`` and ``masked`` as for
    :func:`fedprune.models.cnn1d.build_har_cnn`."""
    layers = tf.keras.layers

    def init(k: int) -> tf.keras.initializers.Initializer:
        return tf.keras.initializers.GlorotUniform(None if seed is None else seed + k)

    def constraint(shape: tuple[int, ...]) -> MaskConstraint | None:
        return MaskConstraint(shape) if masked else None

    def conv(h: tf.Tensor, filters: int, k: int) -> tf.Tensor:
        return layers.Conv1D(
            filters,
            5,
            padding="same",
            activation="relu",
            kernel_constraint=constraint((5, h.shape[-1], filters)),
            kernel_initializer=init(k),
            name=f"conv{k + 1}",
        )(h)

    inputs = tf.keras.Input(shape=tuple(input_shape), name="window")
    h = layers.MaxPool1D(2, name="pool1")(conv(inputs, 8, 0))
    h = layers.MaxPool1D(2, name="pool2")(conv(h, 16, 1))
    h = layers.Dropout(0.2, seed=None if seed is None else seed + 10, name="drop1")(h)
    h = layers.GlobalAveragePooling1D(name="average")(conv(h, 32, 2))
    h = layers.Dense(
        32,
        activation="relu",
        kernel_constraint=constraint((32, 32)),
        kernel_initializer=init(3),
        name="dense",
    )(h)
    h = layers.Dropout(0.2, seed=None if seed is None else seed + 11, name="drop2")(h)
    outputs = layers.Dense(
        num_classes,
        activation="softmax",
        kernel_constraint=constraint((32, num_classes)),
        kernel_initializer=init(4),
        name="probs",
    )(h)
    return tf.keras.Model(inputs, outputs, name="har_cnn_small")
