"""Per-channel input scaling for integer models, folded exactly into the first layer.

A full-integer TFLite model has one scale and zero point for its whole input tensor, so the
nine UCI-HAR channels share one int8 grid: body acceleration (std ~0.1-0.2 g) gets the same
step (~0.02 g) as total acceleration with its ~1 g gravity offset. Rounding the input is,
with the logits' rounding, one of the two largest parts of the int8 error on near-tie
windows (DEVELOPERS.md; the ablation
``experiments/int8_parity.py`` measures what this module removes).

The device can afford one multiply-add per sample and channel before quantizing, so the
exported integer model takes ``z = (x - offset) / scale`` per channel, with each channel's
calibration range mapped to [-1, 1]; the model folds the inverse into its first layer:

* Dense: ``W'[c, :] = scale[c] * W[c, :]``, ``b' = b + offset @ W``.
* Conv1D (stride 1): ``W'[k, c, :] = scale[c] * W[k, c, :]``, ``b' = b + sum_k,c W[k, c, :]
  offset[c]``. "same" padding feeds the convolution zeros of ``x``; in ``z`` these are
  ``-offset / scale``, so the rebuilt model pads with those constants (:class:`ChannelPad1D`,
  a CONCATENATION in TFLite) and convolves "valid". Exact in float.

Each channel's range is extended to include 0 so the padding constants lie in [-1, 1] too
(TFLite quantizes the padded tensor with the input's grid).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from edge_export.keras_chain import chain_layers, rebuild
from fedprune.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class InputScaling:
    """``z = (x - offset) / scale`` per channel (last axis)."""

    offset: np.ndarray
    scale: np.ndarray

    @classmethod
    def fit(cls, x: np.ndarray) -> InputScaling:
        """Map each channel's range over ``x`` (extended to include 0) onto [-1, 1]."""
        if len(x) == 0:
            raise ConfigError("input scaling needs calibration windows; got none")
        axes = tuple(range(x.ndim - 1))
        lo = np.minimum(x.min(axis=axes), 0.0)
        hi = np.maximum(x.max(axis=axes), 0.0)
        half = (hi - lo) / 2
        scale = np.where(half > 0, half, 1.0)  # a constant-zero channel stays as it is
        return cls(((hi + lo) / 2).astype(np.float32), scale.astype(np.float32))

    def apply(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.offset) / self.scale).astype(np.float32)

    def after(self, mean: np.ndarray | None, std: np.ndarray | None) -> InputScaling:
        """The same scaling on raw sensor values when the model's input is first
        standardized ``(x - mean) / std``: one affine map for the device to apply."""
        if mean is None or std is None:
            return self
        return InputScaling(
            (mean + std * self.offset).astype(np.float32), (std * self.scale).astype(np.float32)
        )

    def to_json(self) -> dict:
        return {
            "offset": self.offset.tolist(),
            "scale": self.scale.tolist(),
            "apply": "z = (x - offset) / scale per channel, then z is the model's input (an "
            "integer input tensor: quantize z with its scale and zero point first)",
        }


class ChannelPad1D(tf.keras.layers.Layer):
    """Pads the time axis with a constant per channel (``left`` steps before, ``right``
    after): the "same" padding of a convolution whose input was shifted per channel."""

    def __init__(self, values: np.ndarray, left: int, right: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.values = np.asarray(values, np.float32)
        self.left, self.right = left, right

    def call(self, x: tf.Tensor) -> tf.Tensor:
        batch = x.shape[0] if x.shape[0] is not None else tf.shape(x)[0]
        channels = len(self.values)
        parts = [x]
        if self.left:
            parts.insert(0, tf.broadcast_to(self.values, [batch, self.left, channels]))
        if self.right:
            parts.append(tf.broadcast_to(self.values, [batch, self.right, channels]))
        return tf.concat(parts, axis=1)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "values": self.values.tolist(),
            "left": self.left,
            "right": self.right,
        }


def can_fold(model: tf.keras.Model) -> bool:
    """Whether :func:`fold_input_scaling` can fold into ``model``'s first layer (a Dense, or
    a Conv1D with stride 1, no dilation, one group, 'same' or 'valid' padding and a bias)."""
    first = chain_layers(model)[0]
    if isinstance(first, tf.keras.layers.Dense):
        return True
    return type(first) is tf.keras.layers.Conv1D and _plain_conv(first)


def fold_input_scaling(model: tf.keras.Model, scaling: InputScaling) -> tf.keras.Model:
    """A model computing ``model(x)`` from ``z = scaling.apply(x)``, batch size 1 (what the
    device runs; it lets the converter fold the padding constants)."""
    layers = chain_layers(model)
    first = layers[0]
    if isinstance(first, tf.keras.layers.Dense):
        kernel, bias = first.get_weights()
        folded = tf.keras.layers.Dense(
            first.units, activation=first.activation, name=f"{first.name}_scaled"
        )
        replacement = [folded]
        weights = [scaling.scale[:, None] * kernel, bias + scaling.offset @ kernel]
    elif type(first) is tf.keras.layers.Conv1D and _plain_conv(first):
        kernel, bias = first.get_weights()
        width = kernel.shape[0]
        folded = tf.keras.layers.Conv1D(
            first.filters, width, padding="valid", activation=first.activation,
            name=f"{first.name}_scaled",
        )  # fmt: skip
        replacement = [folded]
        if first.padding == "same":
            left = (width - 1) // 2
            zero = -scaling.offset / scaling.scale
            replacement.insert(0, ChannelPad1D(zero, left, width - 1 - left, name="pad_scaled"))
        weights = [
            scaling.scale[None, :, None] * kernel,
            bias + np.einsum("kco,c->o", kernel, scaling.offset),
        ]
    else:
        raise ConfigError(
            f"per-channel input scaling folds into a first Dense or Conv1D (stride 1, "
            f"'same' or 'valid') layer; {first.name!r} is a {type(first).__name__}: "
            "export with --input-scaling per-tensor"
        )
    rebuilt = rebuild(model, replacement + layers[1:], batch_size=1)
    folded.set_weights([w.astype(np.float32) for w in weights])
    return rebuilt


def _plain_conv(layer: tf.keras.layers.Conv1D) -> bool:
    return (
        tuple(layer.strides) == (1,)
        and tuple(layer.dilation_rate) == (1,)
        and layer.padding in ("same", "valid")
        and layer.groups == 1
        and layer.data_format == "channels_last"
        and layer.use_bias
    )
