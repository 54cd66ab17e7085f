"""One client's masked local training in Keras, for models stacked training cannot run.

:class:`MaskedClientModel` trains one Keras model with Adam on batch-mean cross entropy and
re-applies the kernel masks after every optimizer step (Eq. 12: w = w ⊙ M throughout), with
the epoch's order drawn from the client's own generator: the same semantics as one client of
:class:`fedprune.engine.stacked.StackedModel`, for any architecture (stacked training knows
Conv1D, pooling, dropout, flatten and dense layers only). Dropout streams come from
TensorFlow's global seed, set to the client's seed when the model is built.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from fedprune.sparsity.layers import merge, prunable_mask_flags


class MaskedClientModel:
    """One client's model, optimizer and masks."""

    def __init__(
        self,
        build: Callable[[int], tf.keras.Model],
        weights: Sequence[np.ndarray],
        kernel_masks: Sequence[np.ndarray],
        seed: int,
        learning_rate: float,
    ):
        """``build(seed)`` gives the uncompiled model; ``weights`` its trainable weights;
        ``kernel_masks`` the masks of its prunable kernels, in order."""
        self.model = build(seed)
        variables = self.model.trainable_variables
        if len(weights) != len(variables):
            raise ValueError(f"{len(weights)} weight arrays for {len(variables)} variables")
        flags = prunable_mask_flags(self.model)
        masks = merge([np.asarray(m, np.float32) for m in kernel_masks], weights, flags)
        self.masks = [
            tf.constant(np.reshape(m, v.shape)) if f else None
            for m, v, f in zip(masks, variables, flags)
        ]
        for v, w, m in zip(variables, weights, self.masks):
            v.assign(np.asarray(w, np.float32) if m is None else np.asarray(w) * m.numpy())
        self.optimizer = tf.keras.optimizers.Adam(learning_rate)
        self.loss = tf.keras.losses.SparseCategoricalCrossentropy()
        self._step = tf.function(self._train_step, reduce_retracing=True)

    def _train_step(self, x: tf.Tensor, y: tf.Tensor) -> None:
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            loss = self.loss(y, self.model(x, training=True))
        self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        for v, m in zip(variables, self.masks):
            if m is not None:
                v.assign(v * m)

    def fit_epochs(
        self,
        x: np.ndarray,
        y: np.ndarray,
        epochs: int,
        batch_size: int,
        rng: np.random.Generator,
    ) -> None:
        """``epochs`` epochs over (x, y) in batches of ``batch_size``, shuffled by ``rng``."""
        x, y = np.asarray(x, np.float32), np.asarray(y, np.int64)
        for _ in range(epochs):
            order = rng.permutation(len(y))
            for start in range(0, len(y), batch_size):
                idx = order[start : start + batch_size]
                self._step(tf.constant(x[idx]), tf.constant(y[idx]))

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.model.predict(np.asarray(x, np.float32), batch_size=512, verbose=0)

    def weights(self) -> list[np.ndarray]:
        return [v.numpy() for v in self.model.trainable_variables]
