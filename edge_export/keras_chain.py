"""Keras models as a chain of layers, so export steps can rebuild them with a layer swapped."""

from __future__ import annotations

import tensorflow as tf

from fedprune.errors import ConfigError


def chain_layers(model: tf.keras.Model) -> list[tf.keras.layers.Layer]:
    """The model's layers after its input, in order, when each one feeds only the next.

    Raises :class:`ConfigError` naming the first layer that breaks the chain (several inputs,
    or an output used twice): such graphs cannot be rebuilt layer by layer here.
    """
    layers = [layer for layer in model.layers if not isinstance(layer, tf.keras.layers.InputLayer)]
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        raise ConfigError(f"model {model.name!r}: one input and one output expected")
    previous = model.inputs[0]
    for layer in layers:
        if len(layer.inbound_nodes) != 1 or layer.input is not previous:
            raise ConfigError(
                f"layer {layer.name!r} of {model.name!r} is not part of a plain layer chain; "
                "only sequential models can be rebuilt for integer export"
            )
        previous = layer.output
    return layers


def rebuild(
    model: tf.keras.Model, layers: list[tf.keras.layers.Layer], batch_size: int | None = None
) -> tf.keras.Model:
    """A new functional model applying ``layers`` in order to a fresh input of ``model``'s
    shape. Layers that already belong to a model are copied with their weights (without
    training constraints); new, unbuilt layers are used as they are (set their weights after).
    """
    inputs = tf.keras.Input(shape=model.input_shape[1:], batch_size=batch_size, name="window")
    h = inputs
    for layer in layers:
        if layer.built:
            config = layer.get_config()
            config.pop("kernel_constraint", None)
            copy = type(layer).from_config(config)
            h = copy(h)
            copy.set_weights(layer.get_weights())
        else:
            h = layer(h)
    return tf.keras.Model(inputs, h, name=f"{model.name}_export")
