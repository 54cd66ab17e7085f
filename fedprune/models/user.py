"""Your own Keras model: a function ``model_fn(input_shape, num_classes)`` that returns an
uncompiled ``tf.keras.Model`` ending in class probabilities (a softmax), or, for FedCRef's
autoencoders, ``model_fn(input_dim)`` returning a model that reconstructs its input.

fedprune builds your model once per client and round, always with TensorFlow's global seed set
to the run's seed first (:func:`tf.keras.utils.set_random_seed`), so that unseeded
initializers and dropout give the same model for the same seed. Which weights are pruned is
decided by tfmot's prune registry (:mod:`fedprune.sparsity.layers`); layers it cannot prune
stay dense and are named in the run's ``summary.json``.

What is checked when the model is first built, each a :class:`~fedprune.errors.ConfigError`
that says what to fix: the function returns a ``tf.keras.Model``; its input shape is the
data's; a classifier has ``num_classes`` outputs that sum to 1 (a softmax: the loss is the
cross entropy of probabilities, as every built-in model's), an autoencoder's output has its
input's shape; it has no non-trainable weights (BatchNormalization's moving statistics: the
rounds aggregate trainable weights only; ``LayerNormalization`` works); its initial weights
are finite numbers (a NaN initializer is named by its layer); and Keras rebuilds it from
its architecture (``model.json``, below), before any round is trained: a ``Lambda`` layer
(whose Python function ``model.json`` cannot carry) or a custom layer Keras does not know is
refused then, not after training when the run could never be exported or reopened.

A run records the model's name (``model: "user:<name>"`` in ``config.json``) and writes its
architecture to ``model.json`` (Keras' ``to_json``), from which ``fedprune finetune`` and
``fedprune edge-export`` rebuild it. A custom layer must be registered with
``tf.keras.utils.register_keras_serializable`` to be rebuilt in another process; write what a
``Lambda`` does as such a layer.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fedprune.errors import ConfigError, DataError
from fedprune.runs.names import MODEL_ARCHITECTURE as ARCHITECTURE_FILE

PREFIX = "user:"


def is_user_model(name: str) -> bool:
    """Whether a recorded model name (``config.json``'s ``model``) is one of yours."""
    return isinstance(name, str) and name.startswith(PREFIX)


@dataclasses.dataclass(frozen=True)
class UserModel:
    """Your model function and the name a run records for it.

    Parameters
    ----------
    fn : callable
        ``fn(input_shape, num_classes) -> tf.keras.Model`` (uncompiled), or
        ``fn(input_dim) -> tf.keras.Model`` for an autoencoder.
    name : str
        Letters, digits, ``_``, ``-`` and ``.``; recorded as ``user:<name>``. Default: the
        function's name.
    """

    fn: Callable[..., Any]
    name: str = ""

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise ConfigError(
                f"model_fn must be a function returning a tf.keras.Model, got {self.fn!r}"
            )
        name = self.name or getattr(self.fn, "__name__", "") or "model"
        name = "model" if name == "<lambda>" else name
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise ConfigError(f"model name {name!r}: use letters, digits, '_', '-' and '.' only")
        object.__setattr__(self, "name", name)

    @property
    def recorded(self) -> str:
        """The name ``config.json`` records: ``user:<name>``."""
        return PREFIX + self.name

    def build(self, *args: Any, seed: int) -> Any:  # noqa: ANN401 (a tf.keras.Model)
        """``fn(*args)`` with TensorFlow's global seed set to ``seed`` first."""
        import tensorflow as tf

        tf.keras.utils.set_random_seed(int(seed))
        model = self.fn(*args)
        if not isinstance(model, tf.keras.Model):
            raise ConfigError(
                f"model_fn {self.name!r} returned {type(model).__name__}, not a tf.keras.Model"
            )
        return model

    @classmethod
    def from_architecture(cls, path: str | Path, name: str) -> UserModel:
        """The model saved in ``path`` (``model.json``), rebuilt with fresh weights."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
            json.loads(text)
        except (OSError, UnicodeDecodeError, ValueError) as err:
            reason = getattr(err, "strerror", None) or type(err).__name__
            raise DataError(
                f"{path}: cannot read the run's model architecture ({reason}); this run was "
                f"trained with your model {name!r}: train again, or pass the same model_fn"
            ) from None

        def rebuild(*_args: Any) -> Any:  # noqa: ANN401
            import tensorflow as tf

            try:
                return tf.keras.models.model_from_json(text)
            except (ValueError, TypeError) as err:
                reason = " ".join(str(err).split())[:200]
                raise DataError(
                    f"{path}: Keras cannot rebuild the model ({reason}); register its custom "
                    "layers with tf.keras.utils.register_keras_serializable before calling "
                    "fedprune (a Lambda cannot be rebuilt: train again with a registered "
                    "custom layer in its place)"
                ) from None

        return cls(rebuild, name)


def check_classifier(model: Any, input_shape: tuple[int, ...], num_classes: int, name: str) -> None:  # noqa: ANN401
    """The checks of the module docstring for a classifier."""
    import numpy as np

    _check_input(model, input_shape, name)
    _check_no_state(model, name)
    out = tuple(model.output_shape)
    if out[1:] != (num_classes,):
        raise ConfigError(
            f"model_fn {name!r}: output shape {out} but the data has {num_classes} classes; "
            f"end the model in Dense({num_classes}, activation='softmax')"
        )
    import tensorflow as tf

    if not tf.executing_eagerly():  # inside a traced computation: the first, eager build checked
        return
    _check_rebuildable(model, name)
    _check_finite_weights(model, name)
    probe = np.random.default_rng(0).normal(size=(2, *input_shape)).astype(np.float32)
    sums = np.asarray(model(probe, training=False)).sum(axis=-1)
    if not np.allclose(sums, 1.0, atol=1e-3):
        raise ConfigError(
            f"model_fn {name!r}: its outputs do not sum to 1 (got {sums.round(3).tolist()}); "
            "fedprune trains with the cross entropy of probabilities: end the model in a softmax"
        )


def check_autoencoder(model: Any, input_dim: int, name: str) -> None:  # noqa: ANN401
    """The checks of the module docstring for an autoencoder."""
    _check_input(model, (input_dim,), name)
    if tuple(model.output_shape)[1:] != (input_dim,):
        raise ConfigError(
            f"model_fn {name!r}: output shape {tuple(model.output_shape)} but an autoencoder "
            f"reconstructs its input, ({input_dim},)"
        )
    _check_no_state(model, name)
    import tensorflow as tf

    if tf.executing_eagerly():  # the first build; inside a traced computation it was checked
        _check_rebuildable(model, name)
        _check_finite_weights(model, name)


def _check_input(model: Any, input_shape: tuple[int, ...], name: str) -> None:  # noqa: ANN401
    got = model.input_shape
    if isinstance(got, list) or tuple(got)[1:] != tuple(input_shape):
        raise ConfigError(
            f"model_fn {name!r}: input shape {got} but the data's samples have shape "
            f"{tuple(input_shape)}; build the model with tf.keras.Input(shape=input_shape)"
        )


def _check_no_state(model: Any, name: str) -> None:  # noqa: ANN401
    stateful = sorted({w.name.split("/")[0] for w in model.non_trainable_weights})
    if stateful:
        raise ConfigError(
            f"model_fn {name!r}: layer(s) {', '.join(stateful)} keep non-trainable state "
            "(e.g. BatchNormalization's moving statistics), which the federated rounds do not "
            "aggregate; use LayerNormalization or GroupNormalization instead"
        )


def _check_finite_weights(model: Any, name: str) -> None:  # noqa: ANN401
    """Every initial weight is a finite number (a NaN or inf initializer would otherwise be
    reported as outputs that do not sum to 1)."""
    import numpy as np

    for layer in model.layers:
        for weight in layer.weights:
            values = np.asarray(weight.numpy())
            bad = values.size - int(np.isfinite(values).sum())
            if bad:
                which = weight.name.split("/")[-1].split(":")[0]
                raise ConfigError(
                    f"model_fn {name!r}: layer {layer.name}'s initial weight {which} holds "
                    f"{bad} non-finite value(s) (nan or inf); give the layer an initializer of "
                    "finite numbers"
                )


def _check_rebuildable(model: Any, name: str) -> None:  # noqa: ANN401
    """Keras rebuilds the model from its architecture (``model.to_json()``, what the run
    writes to ``model.json``): export, fine-tuning and reopening the run rebuild it so, in
    another process. A ``Lambda`` holds a Python function the JSON cannot carry; a custom
    layer must be registered."""
    import tensorflow as tf

    lambdas = [layer.name for layer in model.layers if isinstance(layer, tf.keras.layers.Lambda)]
    if lambdas:
        raise ConfigError(
            f"model_fn {name!r}: layer(s) {', '.join(lambdas)} are Lambda layers, which Keras "
            "cannot rebuild from model.json in another process (their Python function is not "
            "saved), so the run could never be exported or reopened; write what they do as a "
            "custom layer registered with tf.keras.utils.register_keras_serializable"
        )
    try:
        tf.keras.models.model_from_json(model.to_json())
    except (ValueError, TypeError, NotImplementedError) as err:
        reason = " ".join(str(err).split())[:200]
        raise ConfigError(
            f"model_fn {name!r}: Keras cannot rebuild it from its architecture (model.json), "
            f"so the run could never be exported or reopened ({reason}); register its custom "
            "layers with tf.keras.utils.register_keras_serializable (and give them "
            "get_config) before calling fedprune"
        ) from None


def write_architecture(model: Any, run_path: str | Path) -> Path:  # noqa: ANN401
    """Write ``model``'s architecture to ``run_path/model.json`` (atomically); returns it."""
    from fedprune.runs.files import write_text

    path = Path(run_path) / ARCHITECTURE_FILE
    write_text(path, model.to_json())
    return path


def resolve(recorded: str, given: UserModel | None, run_path: str | Path) -> str | UserModel:
    """The model a run trains: ``given`` (your model function; it must be the one the run's
    configuration names), else the table model ``recorded`` names, else (``user:<name>``)
    your model rebuilt from the run's ``model.json``."""
    if given is not None:
        if recorded != given.recorded:
            raise ConfigError(
                f"the configuration names model {recorded!r} but model_fn is {given.recorded!r}; "
                "build the configuration with the same model (the API sets it for you)"
            )
        return given
    if is_user_model(recorded):
        return UserModel.from_architecture(
            Path(run_path) / ARCHITECTURE_FILE, recorded[len(PREFIX) :]
        )
    return recorded
