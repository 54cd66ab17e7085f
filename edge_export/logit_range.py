"""The quantization range of the logits of an int8 classifier, from where classes are decided.

The TFLite converter gives the logit tensor (the last Dense layer's output, before SOFTMAX)
the min/max over all calibration windows. A confident personal model's logits span ~90
(-46 to +44), so one int8 step is ~0.35 logits, more than the top-2 margin of its near-tie
windows. The losing classes' very negative logits do not matter: softmax only needs them
well below the winner. Clamping every logit into [lo, hi] keeps a window's class as long as
its top logit is above ``lo`` and its runner-up below ``hi``; so ``lo`` is the lowest
runner-up logit and ``hi`` the highest top logit over the calibration windows (plus a
margin), and the step is finer where near-tie windows are decided.

Tried first and measured worse: ``hi`` at the highest *runner-up* logit (3-5x finer steps),
which tied confident test windows whose two largest logits both exceeded every training
window's runner-up (4 flipped windows in one run, README: Edge export).

The range is imposed with a fixed-range fake-quantization node (:class:`FixedRange`) between
the final Dense layer, rebuilt without its softmax, and a Softmax layer; the converter takes
a FakeQuant node's range as the quantization range of that tensor (calibration fills in the
rest). Probabilities below ~exp(lo - top logit) come out as 0, as int8 outputs do anyway.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from edge_export.keras_chain import chain_layers, rebuild
from fedprune.errors import ConfigError

MARGIN = 0.1  # widen [lo, hi] by this fraction of its width on each side (unseen windows)


class FixedRange(tf.keras.layers.Layer):
    """8-bit fake quantization on [lo, hi]: the converter's quantization range there."""

    def __init__(self, lo: float, hi: float, **kwargs) -> None:
        super().__init__(**kwargs)
        self.lo, self.hi = float(lo), float(hi)

    def call(self, x: tf.Tensor) -> tf.Tensor:
        return tf.quantization.fake_quant_with_min_max_args(x, min=self.lo, max=self.hi)

    def get_config(self) -> dict:
        return {**super().get_config(), "lo": self.lo, "hi": self.hi}


def _softmax_head(model: tf.keras.Model) -> tuple[list, tf.keras.layers.Dense]:
    layers = chain_layers(model)
    head = layers[-1]
    softmax = tf.keras.activations.softmax
    if not (isinstance(head, tf.keras.layers.Dense) and head.activation is softmax):
        raise ConfigError(
            f"a logit range needs a model ending in a softmax Dense layer; {head.name!r} is "
            "not one: export with --logit-range full"
        )
    return layers[:-1], head


def logits(model: tf.keras.Model, x: np.ndarray, batch_size: int = 512) -> np.ndarray:
    """The last layer's pre-softmax outputs for ``x``."""
    _, head = _softmax_head(model)
    features = tf.keras.Model(model.inputs[0], head.input)
    h = features.predict(x, verbose=0, batch_size=batch_size)
    kernel, bias = head.get_weights()
    return h @ kernel + bias


def decision_logit_range(z: np.ndarray, margin: float = MARGIN) -> tuple[float, float]:
    """[lo, hi] from the lowest runner-up (second-largest) logit to the highest top logit
    over the rows of ``z``, widened by ``margin`` x width (at least 1 logit) on each side and
    to include 0 (TFLite's zero point must be representable)."""
    if z.ndim != 2 or z.shape[1] < 2 or len(z) == 0:
        raise ConfigError(f"a logit range needs >= 1 window of >= 2 class logits; got {z.shape}")
    ordered = np.sort(z, axis=1)
    lo, hi = float(ordered[:, -2].min()), float(ordered[:, -1].max())
    pad = max(margin * (hi - lo), 1.0)
    return min(lo - pad, 0.0), max(hi + pad, 0.0)


def with_logit_range(model: tf.keras.Model, lo: float, hi: float) -> tf.keras.Model:
    """``model`` with its logits clamped to and quantized on [lo, hi] before the softmax."""
    if not lo <= 0 <= hi or lo == hi:
        raise ConfigError(f"a logit range must contain 0 (TFLite's zero point); got [{lo}, {hi}]")
    body, head = _softmax_head(model)
    linear = tf.keras.layers.Dense(head.units, name=f"{head.name}_logits")
    rebuilt = rebuild(
        model,
        [*body, linear, FixedRange(lo, hi, name="logit_range"), tf.keras.layers.Softmax()],
        batch_size=model.input_shape[0],
    )
    linear.set_weights(head.get_weights())
    return rebuilt
