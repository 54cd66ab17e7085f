"""Per-cluster autoencoders trained locally on a client (FedCRef, Phase 1, Alg. 1 line 8).

Local training is not federated: each client fits one autoencoder per local cluster with
Adam on the MSE for ``epochs`` epochs (paper Table 2: 20). One compiled Keras model is reused
for every cluster: its weights are reset to a fresh seeded initialization and the optimizer's
slots to zero before each fit, so a cluster's model depends only on (its samples, its seed)
and never on what was trained before it.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from fedprune.engine import interrupts
from fedprune.engine.datasets import reconstruction_dataset
from fedprune.models.autoencoder import dense_layers
from fedprune.models.spec import AutoencoderSpec
from fedprune.sparsity.layers import prunable_mask_flags


def cluster_seed(seed: int, *keys: int) -> int:
    """A 31-bit seed for one (iteration, client, cluster, ...) from the run seed."""
    return int(np.random.default_rng([seed, *keys]).integers(2**31 - 1))


def glorot_init(model: tf.keras.Model, seed: int) -> list[np.ndarray]:
    """Glorot-uniform kernels and zero biases for ``model``'s Dense layers, from ``seed``
    (the kernels are the prunable tensors, :func:`fedprune.sparsity.layers.prunable_mask_flags`;
    the model has no non-trainable weights)."""
    rng = np.random.default_rng(seed)
    weights = []
    for w, kernel in zip(model.get_weights(), prunable_mask_flags(model), strict=True):
        if kernel:
            limit = np.sqrt(6.0 / (w.shape[0] + w.shape[1]))
            weights.append(rng.uniform(-limit, limit, size=w.shape).astype(np.float32))
        else:
            weights.append(np.zeros_like(w))
    return weights


class EndOnInterrupt(tf.keras.callbacks.Callback):
    """Ends Keras ``fit`` after the epoch in which SIGINT came
    (:func:`fedprune.engine.interrupts.raise_if_received`). It reads no metric, so it adds
    no synchronization to the training."""

    def __init__(self) -> None:
        super().__init__()
        self._supports_tf_logs = True  # the logs stay tensors: nothing is converted for us

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        interrupts.raise_if_received()


class LocalTrainer:
    """Fits the paper's autoencoder on one cluster's samples at a time."""

    def __init__(
        self,
        input_dim: int,
        epochs: int = 20,
        batch_size: int = 32,
        learning_rate: float = 1e-3,
    ):
        self.epochs = epochs
        self.batch_size = batch_size
        self.model = AutoencoderSpec(input_dim, seed=0).keras()
        self.model.compile(
            optimizer=tf.keras.optimizers.Adam(learning_rate), loss="mse", steps_per_execution=64
        )
        # Keras traces its train step in the first fit (seconds of graph building, in Python,
        # where Ctrl-C raises at once): done here, so that the deferred Ctrl-C of fit waits
        # for one epoch at most. Every fit resets the weights and the optimizer's state.
        warm_up = reconstruction_dataset(np.zeros((1, input_dim), np.float32), batch_size, 0)
        self.model.fit(warm_up, epochs=1, verbose=0)

    def _reset_optimizer(self) -> None:
        variables = self.model.optimizer.variables
        for var in variables() if callable(variables) else variables:
            var.assign(tf.zeros_like(var))

    def fit(self, x: np.ndarray, seed: int) -> list[np.ndarray]:
        """Weights of an autoencoder trained from scratch (seeded) on ``x``.

        Ctrl-C during the fit ends it at the next epoch's end: the interrupt is only noted
        while TensorFlow runs (:func:`fedprune.engine.interrupts.deferred`), since one raised
        inside TensorFlow's eager operations is lost there or corrupts its memory."""
        with interrupts.deferred():
            self.model.set_weights(glorot_init(self.model, seed))
            self._reset_optimizer()
            data = reconstruction_dataset(x, self.batch_size, shuffle_seed=seed)
            self.model.fit(data, epochs=self.epochs, verbose=0, callbacks=[EndOnInterrupt()])
            return self.model.get_weights()

    def encode(self, weights: list[np.ndarray], x: np.ndarray, layers: int = 3) -> np.ndarray:
        """The latent code (output of the first ``layers`` Dense layers) of ``x``."""
        h = np.asarray(x, np.float32)
        for kernel, bias in dense_layers(weights)[:layers]:
            h = np.maximum(h @ kernel + bias, 0.0)
        return h
