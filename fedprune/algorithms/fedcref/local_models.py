"""Per-cluster autoencoders trained locally on a client (FedCRef, Phase 1, Alg. 1 line 8).

Local training is not federated: each client fits one autoencoder per local cluster with
Adam on the MSE for ``epochs`` epochs (paper Table 2: 20). One compiled Keras model is reused
for every cluster: its weights are reset to a fresh seeded initialization and the optimizer's
slots to zero before each fit, so a cluster's model depends only on (its samples, its seed)
and never on what was trained before it.

The autoencoder is the paper's (:func:`fedprune.models.autoencoder.build_autoencoder`,
evaluated by its numpy forward pass) or your own (a
:class:`~fedprune.models.user.UserModel` whose ``fn(input_dim)`` returns it). Yours is
reinitialized for each fit by building it again with the fit's seed (its own initializers,
:meth:`~fedprune.models.user.UserModel.build`), and evaluated by Keras. The reconstruction
error of a sample is the mean squared difference between the model's output and the sample
for both. The *code* of a sample (:meth:`LocalTrainer.encode`, the k-means initialization) is
the output of the narrowest inner layer: the paper's 32-unit layer, or in your model the
layer (neither its input nor its last layer) with the fewest output values per sample, the
first of equals (:func:`code_layer`); a model without such a layer codes a sample as itself.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from fedprune.engine import interrupts
from fedprune.engine.datasets import reconstruction_dataset
from fedprune.models.autoencoder import dense_layers, reconstruction_errors
from fedprune.models.spec import AutoencoderSpec
from fedprune.models.user import UserModel
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


def code_layer(model: tf.keras.Model) -> tf.keras.layers.Layer | None:
    """The layer of ``model`` whose output is a sample's code: among the layers other than
    the input and the last one, those with one output of known size, the one with the fewest
    values per sample (the first of equals); ``None`` when there is none."""
    best: tuple[int, tf.keras.layers.Layer] | None = None
    for layer in model.layers[:-1]:
        if isinstance(layer, tf.keras.layers.InputLayer):
            continue
        try:
            shape = layer.output_shape
        except (AttributeError, RuntimeError):  # called more than once, or never built
            continue
        if not isinstance(shape, tuple) or any(d is None for d in shape[1:]):
            continue
        size = int(np.prod(shape[1:]))
        if best is None or size < best[0]:
            best = (size, layer)
    return None if best is None else best[1]


def encoder_of(model: tf.keras.Model) -> tf.keras.Model | None:
    """A model sharing ``model``'s layers from its input to :func:`code_layer`'s output
    (``None`` when there is no code layer or Keras cannot cut the model there)."""
    layer = code_layer(model)
    if layer is None:
        return None
    for output in (lambda: layer.output, lambda: layer.get_output_at(-1)):
        try:
            return tf.keras.Model(model.inputs, output())
        except (AttributeError, RuntimeError, ValueError):  # e.g. a nested model's own graph
            continue
    return None


class LocalTrainer:
    """Fits the autoencoder (the paper's, or ``model``, your own) on one cluster's samples
    at a time, and evaluates and encodes with the weights it gave."""

    def __init__(
        self,
        input_dim: int,
        epochs: int = 20,
        batch_size: int = 32,
        learning_rate: float = 1e-3,
        model: str | UserModel = "autoencoder",
    ):
        self.input_dim = input_dim
        self.epochs = epochs
        self.batch_size = batch_size
        self.user = model if isinstance(model, UserModel) else None
        self.model = AutoencoderSpec(input_dim, seed=0, model=model).keras()
        self._encoder: tf.keras.Model | None | bool = False  # False: not cut yet
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

    def initial_weights(self, seed: int) -> list[np.ndarray]:
        """The seeded initialization of a fit: :func:`glorot_init` for the paper's
        autoencoder, yours built again with ``seed``."""
        if self.user is None:
            return glorot_init(self.model, seed)
        return AutoencoderSpec(self.input_dim, seed, model=self.user).keras().get_weights()

    def fit(self, x: np.ndarray, seed: int) -> list[np.ndarray]:
        """Weights of an autoencoder trained from scratch (seeded) on ``x``.

        Ctrl-C during the fit ends it at the next epoch's end: the interrupt is only noted
        while TensorFlow runs (:func:`fedprune.engine.interrupts.deferred`), since one raised
        inside TensorFlow's eager operations is lost there or corrupts its memory."""
        with interrupts.deferred():
            self.model.set_weights(self.initial_weights(seed))
            self._reset_optimizer()
            data = reconstruction_dataset(x, self.batch_size, shuffle_seed=seed)
            self.model.fit(data, epochs=self.epochs, verbose=0, callbacks=[EndOnInterrupt()])
            return self.model.get_weights()

    def errors(self, weights: list[np.ndarray], x: np.ndarray, chunk: int = 8192) -> np.ndarray:
        """Per-sample mean squared reconstruction error of the autoencoder with ``weights``
        on ``x`` ([n, d]; float32)."""
        if self.user is None:
            return reconstruction_errors(weights, x, chunk)
        x = np.asarray(x, np.float32)
        out = np.empty(len(x), np.float32)
        with interrupts.deferred():
            self.model.set_weights(weights)
            for start in range(0, len(x), chunk):
                part = x[start : start + chunk]
                recon = np.asarray(self.model(part, training=False)).reshape(len(part), -1)
                out[start : start + chunk] = np.mean(np.square(recon - part), axis=1)
        return out

    def encode(self, weights: list[np.ndarray], x: np.ndarray, layers: int = 3) -> np.ndarray:
        """The latent code of ``x`` (module docstring): for the paper's autoencoder the
        output of its first ``layers`` Dense layers, for yours that of :func:`code_layer`
        (flattened), or ``x`` itself where your model has none."""
        h = np.asarray(x, np.float32)
        if self.user is None:
            for kernel, bias in dense_layers(weights)[:layers]:
                h = np.maximum(h @ kernel + bias, 0.0)
            return h
        if self._encoder is False:
            self._encoder = encoder_of(self.model)
        if self._encoder is None:
            return h
        with interrupts.deferred():
            self.model.set_weights(weights)
            return np.asarray(self._encoder(h, training=False)).reshape(len(h), -1)
