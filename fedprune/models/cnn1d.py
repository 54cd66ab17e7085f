"""The 1D-CNN used by every method in the CA-AFP paper (Section 4.3, "Model Architecture").

Two blocks Conv1D(64, 5, same, ReLU) -> MaxPool1D(2) -> Dropout(0.3); Flatten -> Dense(32,
ReLU) -> Dropout(0.2) -> Dense(classes, softmax). 89,254 parameters for (128, 9) inputs
(UCI-HAR) and 124,198 for (200, 3) (WISDM). The paper does not give the pooling padding; Keras'
default ("valid") gives these counts. The layers with prunable kernels, in order, are
``fedprune.models.table.MODELS["har_cnn"].kernel_layers``.
"""

from __future__ import annotations

import tensorflow as tf


def _offset(seed: int | None, k: int) -> int | None:
    return None if seed is None else seed + k


class MaskConstraint(tf.keras.constraints.Constraint):
    """Keeps a kernel equal to kernel ⊙ mask after every optimizer step (Eq. 12).

    The mask is a variable, so one compiled model serves many clients' masks.
    """

    def __init__(self, shape: tuple[int, ...]):
        self.mask = tf.Variable(tf.ones(shape), trainable=False)

    def __call__(self, w: tf.Tensor) -> tf.Tensor:
        return w * self.mask


def build_har_cnn(
    input_shape: tuple[int, int],
    num_classes: int = 6,
    seed: int | None = None,
    masked: bool = False,
) -> tf.keras.Model:
    """Build the paper's HAR 1D-CNN (uncompiled).

    ``seed`` fixes the initial weights and the dropout layers' seeds. With ``masked`` every
    kernel gets a :class:`MaskConstraint` (set ``layer.kernel_constraint.mask``).
    """

    def constraint(shape: tuple[int, ...]) -> MaskConstraint | None:
        return MaskConstraint(shape) if masked else None

    init = tf.keras.initializers.GlorotUniform
    layers = tf.keras.layers
    inputs = tf.keras.Input(shape=tuple(input_shape), name="window")
    h = inputs
    for block in range(2):
        h = layers.Conv1D(
            64,
            5,
            padding="same",
            kernel_constraint=constraint((5, h.shape[-1], 64)),
            activation="relu",
            kernel_initializer=init(None if seed is None else seed + block),
            name=f"conv{block + 1}",
        )(h)
        h = layers.MaxPool1D(2, name=f"pool{block + 1}")(h)
        h = layers.Dropout(0.3, seed=_offset(seed, 10 + block), name=f"drop{block + 1}")(h)
    h = layers.Flatten(name="flatten")(h)
    h = layers.Dense(
        32,
        activation="relu",
        kernel_constraint=constraint((h.shape[-1], 32)),
        kernel_initializer=init(None if seed is None else seed + 2),
        name="dense",
    )(h)
    h = layers.Dropout(0.2, seed=_offset(seed, 12), name="drop3")(h)
    outputs = layers.Dense(
        num_classes,
        activation="softmax",
        kernel_constraint=constraint((32, num_classes)),
        kernel_initializer=init(None if seed is None else seed + 3),
        name="probs",
    )(h)
    return tf.keras.Model(inputs, outputs, name="har_cnn")
