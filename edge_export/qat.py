"""Quantization-aware fine-tuning (tfmot) of a personal model before its int8 conversion.

Post-training int8 quantization of the HAR 1D-CNN flips a few near-tie test windows: the
logit tensor of a confidently fine-tuned personal model spans about 80 (scale ~0.33 per
int8 step) and the dense layer's kernel is quantized per tensor, so a window whose two best
logits differ by ~0.2 can swap classes. Quantization-aware training (Jacob et al. 2018, the
scheme tfmot implements) fine-tunes the model with the int8 rounding simulated in the forward
pass, so the weights settle where the quantized model decides like the float one.

tfmot 0.7.5's default registry has no entries for ``Conv1D`` and ``MaxPooling1D``; this module
adds them: Conv1D kernels get an 8-bit symmetric per-tensor fake-quant (tfmot's per-axis
quantizer only handles rank-2/4 kernels; the converter then stores the conv kernels per tensor,
as the fake-quant ranges say) and its ReLU output a moving-average activation quantizer;
max-pooling passes its input's quantization through. Pruning masks stay exactly: the kernels'
zeros are re-applied after every batch (the effect of tfmot's prune-preserving scheme, which
covers only the layers in its registry).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf
import tensorflow_model_optimization as tfmot

from fedprune.errors import ConfigError

_qk = tfmot.quantization.keras


class Conv1DQuantizeConfig(_qk.QuantizeConfig):
    """8-bit fake-quant of a Conv1D kernel (symmetric, per tensor) and of its activation."""

    def get_weights_and_quantizers(self, layer: tf.keras.layers.Layer) -> list:
        quantizer = _qk.quantizers.LastValueQuantizer(
            num_bits=8, symmetric=True, narrow_range=True, per_axis=False
        )
        return [(layer.kernel, quantizer)]

    def get_activations_and_quantizers(self, layer: tf.keras.layers.Layer) -> list:
        quantizer = _qk.quantizers.MovingAverageQuantizer(
            num_bits=8, symmetric=False, narrow_range=False, per_axis=False
        )
        return [(layer.activation, quantizer)]

    def set_quantize_weights(self, layer: tf.keras.layers.Layer, weights: list) -> None:
        layer.kernel = weights[0]

    def set_quantize_activations(self, layer: tf.keras.layers.Layer, activations: list) -> None:
        layer.activation = activations[0]

    def get_output_quantizers(self, layer: tf.keras.layers.Layer) -> list:
        return []

    def get_config(self) -> dict:
        return {}


class PassThroughQuantizeConfig(_qk.QuantizeConfig):
    """No fake-quant: the layer (max-pooling) keeps its input's quantization."""

    def get_weights_and_quantizers(self, layer: tf.keras.layers.Layer) -> list:
        return []

    def get_activations_and_quantizers(self, layer: tf.keras.layers.Layer) -> list:
        return []

    def set_quantize_weights(self, layer: tf.keras.layers.Layer, weights: list) -> None:
        pass

    def set_quantize_activations(self, layer: tf.keras.layers.Layer, activations: list) -> None:
        pass

    def get_output_quantizers(self, layer: tf.keras.layers.Layer) -> list:
        return []

    def get_config(self) -> dict:
        return {}


_CUSTOM = {
    "Conv1DQuantizeConfig": Conv1DQuantizeConfig,
    "PassThroughQuantizeConfig": PassThroughQuantizeConfig,
}


def _annotate(layer: tf.keras.layers.Layer) -> tf.keras.layers.Layer:
    if isinstance(layer, tf.keras.layers.InputLayer):
        return layer
    if isinstance(layer, tf.keras.layers.Conv1D):
        return _qk.quantize_annotate_layer(layer, Conv1DQuantizeConfig())
    if isinstance(layer, tf.keras.layers.MaxPooling1D):
        return _qk.quantize_annotate_layer(layer, PassThroughQuantizeConfig())
    return _qk.quantize_annotate_layer(layer)


def quantization_aware(model: tf.keras.Model) -> tf.keras.Model:
    """A fake-quantized copy of ``model`` with its weights (not yet fine-tuned)."""
    annotated = tf.keras.models.clone_model(model, clone_function=_annotate)
    annotated.set_weights(model.get_weights())
    try:
        with _qk.quantize_scope(_CUSTOM):
            return _qk.quantize_apply(annotated)
    except RuntimeError as err:  # tfmot names the layer it cannot quantize
        raise ConfigError(f"quantization-aware training: {err}") from None


def _kernels(model: tf.keras.Model) -> list[tf.Variable]:
    return [w for layer in model.layers for w in layer.trainable_weights if "kernel" in w.name]


class _KeepZeros(tf.keras.callbacks.Callback):
    """Re-applies each kernel's zero pattern after every batch, so pruned weights stay 0."""

    def __init__(self, kernels: Sequence[tf.Variable]):
        super().__init__()
        self.kernels = list(kernels)
        self.masks = [tf.constant(k.numpy() != 0, dtype=k.dtype) for k in self.kernels]

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        for kernel, mask in zip(self.kernels, self.masks):
            kernel.assign(kernel * mask)


def quantization_aware_finetune(
    model: tf.keras.Model,
    x: np.ndarray,
    y: np.ndarray,
    epochs: int = 2,
    learning_rate: float = 1e-4,
    batch_size: int = 32,
    seed: int = 0,
) -> tf.keras.Model:
    """Fine-tune a fake-quantized copy of ``model`` on ``(x, y)``; ``model`` is not changed.

    The copy converts with the TFLite converter like any Keras model; its kernels keep the
    zeros of ``model``'s kernels (pruning masks) exactly. Adam, sparse categorical cross-entropy,
    ``epochs`` passes over the client's training windows, shuffled with ``seed``.
    """
    if epochs < 1:
        raise ConfigError(f"quantization-aware fine-tuning needs epochs >= 1, got {epochs}")
    if learning_rate <= 0:
        raise ConfigError(f"quantization-aware learning rate must be > 0, got {learning_rate}")
    tf.keras.utils.set_random_seed(seed)
    qat = quantization_aware(model)
    qat.compile(tf.keras.optimizers.Adam(learning_rate), "sparse_categorical_crossentropy")
    qat.fit(
        x,
        y,
        epochs=epochs,
        batch_size=batch_size,
        shuffle=True,
        verbose=0,
        callbacks=[_KeepZeros(_kernels(qat))],
    )
    return qat
