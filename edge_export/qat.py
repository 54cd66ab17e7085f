"""Quantization-aware fine-tuning (tfmot) of a personal model before its int8 conversion.

Post-training int8 quantization of the HAR 1D-CNN flips a few near-tie test windows: the
logit tensor of a confidently fine-tuned personal model spans about 80 (scale ~0.33 per
int8 step) and the dense layer's kernel is quantized per tensor, so a window whose two best
logits differ by ~0.2 can swap classes. Quantization-aware training (Jacob et al. 2018, the
scheme tfmot implements) fine-tunes the model with the int8 rounding simulated in the forward
pass. Measured on 30 UCI-HAR personal models (README, Edge export): the int8 file then
disagrees with *its own* float model on 1 of 2,060 test windows, but the fine-tuning itself
changes the model (a few clients gain or lose a window against the trained model), so it is a
separate format (``int8-qat``), not a fix of ``int8``.

tfmot 0.7.5's default registry has no entries for ``Conv1D`` and ``MaxPooling1D``; this module
adds them: Conv1D kernels get an 8-bit symmetric per-output-channel fake-quant (tfmot's
per-axis quantizer only handles rank-2/4 kernels) and its ReLU output a moving-average
activation quantizer; max-pooling passes its input's quantization through. Activation ranges
start calibrated (:func:`calibrate_ranges`). Pruning masks stay exactly: the kernels' zeros are
re-applied after every batch (the effect of tfmot's prune-preserving scheme, which covers only
the layers in its registry). The trained weights go back into a plain copy of the model, which
the converter quantizes after training like any model (:func:`quantization_aware_finetune`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_model_optimization as tfmot

from fedprune.errors import ConfigError
from fedprune.sparsity.layers import prunable_mask_flags

_qk = tfmot.quantization.keras


class PerChannelKernelQuantizer(_qk.quantizers.Quantizer):
    """Symmetric 8-bit fake-quant per output channel (last axis) of a kernel of any rank.

    The int8 grid of TFLite's per-channel weights: scale max|w_c| / 127, zero point 0, values
    in [-127, 127]. tfmot's ``LastValueQuantizer(per_axis=True)`` does this for rank-2/4
    kernels only.
    """

    def build(self, tensor_shape: tf.TensorShape, name: str, layer: tf.keras.layers.Layer) -> dict:
        channels = int(tensor_shape[-1])
        return {
            bound: layer.add_weight(
                f"{name}_{bound}",
                shape=(channels,),
                initializer=tf.keras.initializers.Constant(-6.0 if bound == "min" else 6.0),
                trainable=False,
            )
            for bound in ("min", "max")
        }

    def __call__(self, inputs: tf.Tensor, training: bool, weights: dict, **kwargs) -> tf.Tensor:
        bound = tf.reduce_max(tf.abs(inputs), axis=list(range(inputs.shape.rank - 1)))
        weights["min"].assign(-bound)
        weights["max"].assign(bound)
        return tf.quantization.fake_quant_with_min_max_vars_per_channel(
            inputs, -bound, bound, num_bits=8, narrow_range=True
        )

    def get_config(self) -> dict:
        return {}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PerChannelKernelQuantizer)

    def __ne__(self, other: object) -> bool:
        return not self == other


class Conv1DQuantizeConfig(_qk.QuantizeConfig):
    """8-bit fake-quant of a Conv1D kernel (per output channel) and of its activation."""

    def get_weights_and_quantizers(self, layer: tf.keras.layers.Layer) -> list:
        return [(layer.kernel, PerChannelKernelQuantizer())]

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
    "PerChannelKernelQuantizer": PerChannelKernelQuantizer,
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


def _without_activation(layer: tf.keras.layers.Layer, inputs: np.ndarray) -> np.ndarray:
    """``layer``'s output before its activation (e.g. the logits of a softmax layer)."""
    linear = layer.__class__.from_config(dict(layer.get_config(), activation="linear"))
    linear(inputs[:1])
    linear.set_weights(layer.get_weights())
    return linear(inputs).numpy()


def calibrate_ranges(qat: tf.keras.Model, model: tf.keras.Model, x: np.ndarray) -> None:
    """Set every activation range of ``qat`` to the min/max that ``model`` reaches on ``x``.

    tfmot starts each range at [-6, 6] (the input's at [0, 0]) and moves it by an exponential
    moving average with decay 0.999 per training step. A client has a few hundred windows,
    so a short fine-tuning takes tens of steps and the ranges would barely leave their start:
    logits clipped to +-6 (two classes tied at 6 flipped 12 of 71 windows of one client in our
    measurement) and hidden activations clipped like ReLU6. Starting from the float model's
    ranges on the client's training windows (what post-training calibration uses) the
    fine-tuning adapts the weights to the int8 grid the converter will actually use.
    """
    layers = {layer.name: layer for layer in model.layers}
    for wrapper in qat.layers:
        ranges = {
            v.name.split("/")[-1].split(":")[0]: v
            for v in wrapper.non_trainable_weights
            if v.name.endswith(("_min:0", "_max:0")) and "kernel" not in v.name
        }
        if not ranges:
            continue
        if not isinstance(wrapper, _qk.QuantizeWrapper):  # the QuantizeLayer of the input
            values = x
        else:
            layer = layers[wrapper.layer.name]
            inputs = tf.keras.Model(model.inputs, layer.input).predict(x, verbose=0)
            if any(name.startswith("pre_activation") for name in ranges):
                values = _without_activation(layer, inputs)
            else:
                values = layer(inputs).numpy()
        for name, variable in ranges.items():
            bound = (
                min(0.0, float(values.min()))
                if name.endswith("_min")
                else max(0.0, float(values.max()))
            )
            variable.assign(bound)


def _short(variable: tf.Variable) -> str:
    return variable.name.split("/")[-1].split(":")[0]


def _kernels(qat: tf.keras.Model, model: tf.keras.Model) -> list[tf.Variable]:
    """The variables of ``qat`` holding ``model``'s prunable kernels
    (:func:`fedprune.sparsity.layers.prunable_mask_flags`), in layer order."""
    owned = [(layer.name, _short(w)) for layer in model.layers for w in layer.trainable_weights]
    prunable = {name for name, flag in zip(owned, prunable_mask_flags(model)) if flag}
    return [
        v
        for layer in qat.layers
        for v in layer.trainable_weights
        if (getattr(layer, "layer", layer).name, _short(v)) in prunable
    ]


class _KeepZeros(tf.keras.callbacks.Callback):
    """Re-applies each kernel's zero pattern after every batch, so pruned weights stay 0."""

    def __init__(self, kernels: Sequence[tf.Variable]):
        super().__init__()
        self.kernels = list(kernels)
        self.masks = [tf.constant(k.numpy() != 0, dtype=k.dtype) for k in self.kernels]

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        for kernel, mask in zip(self.kernels, self.masks):
            kernel.assign(kernel * mask)


def train_quantization_aware(
    model: tf.keras.Model,
    x: np.ndarray,
    y: np.ndarray,
    epochs: int = 2,
    learning_rate: float = 1e-4,
    batch_size: int = 32,
    seed: int = 0,
) -> tf.keras.Model:
    """The fake-quantized copy of ``model`` (:func:`quantization_aware`), trained on ``(x, y)``.

    Activation ranges start calibrated on ``x`` (:func:`calibrate_ranges`); kernels keep the
    zeros of ``model``'s kernels (pruning masks) exactly. Adam, sparse categorical
    cross-entropy, ``epochs`` passes over ``x`` shuffled with ``seed``.
    """
    if epochs < 1:
        raise ConfigError(f"quantization-aware fine-tuning needs epochs >= 1, got {epochs}")
    if learning_rate <= 0:
        raise ConfigError(f"quantization-aware learning rate must be > 0, got {learning_rate}")
    tf.keras.utils.set_random_seed(seed)
    qat = quantization_aware(model)
    calibrate_ranges(qat, model, x)
    qat.compile(tf.keras.optimizers.Adam(learning_rate), "sparse_categorical_crossentropy")
    qat.fit(
        x,
        y,
        epochs=epochs,
        batch_size=batch_size,
        shuffle=True,
        verbose=0,
        callbacks=[_KeepZeros(_kernels(qat, model))],
    )
    return qat


def float_copy(qat: tf.keras.Model, model: tf.keras.Model) -> tf.keras.Model:
    """A copy of ``model`` (plain Keras layers) carrying the weights trained in ``qat``."""
    trained = {
        (wrapper.layer.name, v.name.split("/")[-1]): v.numpy()
        for wrapper in qat.layers
        if isinstance(wrapper, _qk.QuantizeWrapper)
        for v in wrapper.trainable_weights
    }
    copy = tf.keras.models.clone_model(model)
    copy.set_weights(
        [
            trained[(layer.name, v.name.split("/")[-1])]
            for layer in model.layers
            for v in layer.weights
        ]
    )
    return copy


def quantization_aware_finetune(
    model: tf.keras.Model, x: np.ndarray, y: np.ndarray, **training: Any
) -> tf.keras.Model:
    """``model`` fine-tuned quantization-aware on ``(x, y)``, as a plain Keras model.

    Trained with int8 fake-quant (:func:`train_quantization_aware`), then converted like any
    model: the converter's post-training int8 path (per-channel conv kernels, calibrated
    activations) lands on the grid the training simulated. The fake-quant graph itself is not
    converted because TF 2.14's converter rejects a per-channel fake-quant on a Conv1D kernel
    ("'tfl.transpose' op has mismatched quantized axes"), and a per-tensor one costs the conv
    layers precision (3 flipped windows on one client in our measurement). ``model`` is not
    changed. ``training``: the keyword arguments of :func:`train_quantization_aware`.
    """
    return float_copy(train_quantization_aware(model, x, y, **training), model)
