"""Model specs: what a learning process needs to know about its model.

A spec names a :data:`fedprune.models.table.MODELS` entry, or holds your own model function
(:class:`fedprune.models.user.UserModel`), and the arguments of its builder (input shape,
classes, initialization seed). It gives the Keras model, the loss, the
batched input spec and the deterministic initial weights; the engine takes a spec, builds
TFF's model function from it (:func:`fedprune.engine.step_noise.variable_model_fn`) and never
imports a concrete builder.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import tensorflow as tf

from fedprune.errors import ConfigError
from fedprune.models.table import ModelEntry, model_entry
from fedprune.models.user import UserModel, check_autoencoder, check_classifier

if TYPE_CHECKING:  # TFF (~10 s to import) only where a process is built: not for export
    import tensorflow_federated as tff


def element_spec(input_shape: tuple[int, ...]) -> tuple[tf.TensorSpec, tf.TensorSpec]:
    """Batched (windows, labels) spec of every client dataset."""
    return (
        tf.TensorSpec([None, *input_shape], tf.float32),
        tf.TensorSpec([None], tf.int64),
    )


def reconstruction_spec(input_dim: int) -> tuple[tf.TensorSpec, tf.TensorSpec]:
    """Batched (x, x) spec of an autoencoder's client datasets."""
    return (
        tf.TensorSpec([None, input_dim], tf.float32),
        tf.TensorSpec([None, input_dim], tf.float32),
    )


class _SpecBase:
    """Shared by the model specs: the TFF model function and deterministic initial weights."""

    seed: int
    model: str | UserModel

    def entry(self) -> ModelEntry:
        """This spec's model table entry (a ConfigError for your own model)."""
        if isinstance(self.model, UserModel):
            raise ConfigError(f"model {self.model.name!r} is yours, not in the model table")
        return model_entry(self.model)

    @property
    def recorded_model(self) -> str:
        """The model's name as a run records it: a table name, or ``user:<name>``."""
        return self.model.recorded if isinstance(self.model, UserModel) else self.model

    def keras(self) -> tf.keras.Model:
        raise NotImplementedError

    def loss(self) -> tf.keras.losses.Loss:
        raise NotImplementedError

    def input_spec(self) -> tuple[tf.TensorSpec, tf.TensorSpec]:
        raise NotImplementedError

    def initial_weights(self) -> tff.learning.models.ModelWeights:
        """Deterministic initial weights (numpy) for this seed."""
        import tensorflow_federated as tff

        model = self.keras()
        return tff.learning.models.ModelWeights(
            trainable=[w.numpy() for w in model.trainable_weights],
            non_trainable=[w.numpy() for w in model.non_trainable_weights],
        )

    def _check_task(self, task: str) -> None:
        if isinstance(self.model, UserModel):
            return  # checked when first built
        if self.entry().task != task:
            raise ConfigError(
                f"model {self.model!r} is a {self.entry().task} model; "
                f"{type(self).__name__} needs a {task} model"
            )


@dataclasses.dataclass(frozen=True)
class ModelSpec(_SpecBase):
    """A classifier (the HAR 1D-CNN): input shape, classes and the initialization seed."""

    input_shape: tuple[int, ...]
    num_classes: int
    seed: int
    model: str | UserModel = "har_cnn"

    def __post_init__(self) -> None:
        self._check_task("classification")

    def keras(self, masked: bool = False) -> tf.keras.Model:
        """The uncompiled model; ``masked``: every kernel gets a ``MaskConstraint`` (table
        models only)."""
        if isinstance(self.model, UserModel):
            model = self.model.build(self.input_shape, self.num_classes, seed=self.seed)
            check_classifier(model, self.input_shape, self.num_classes, self.model.name)
            return model
        kwargs = {"masked": True} if masked else {}
        return self.entry().build(self.input_shape, self.num_classes, seed=self.seed, **kwargs)

    def loss(self) -> tf.keras.losses.Loss:
        return tf.keras.losses.SparseCategoricalCrossentropy()

    def input_spec(self) -> tuple[tf.TensorSpec, tf.TensorSpec]:
        return element_spec(self.input_shape)


@dataclasses.dataclass(frozen=True)
class AutoencoderSpec(_SpecBase):
    """The FedCRef autoencoder: batches are (x, x) pairs and the loss is the MSE."""

    input_dim: int
    seed: int
    model: str | UserModel = "autoencoder"

    def __post_init__(self) -> None:
        self._check_task("reconstruction")

    def keras(self) -> tf.keras.Model:
        if isinstance(self.model, UserModel):
            model = self.model.build(self.input_dim, seed=self.seed)
            check_autoencoder(model, self.input_dim, self.model.name)
            return model
        return self.entry().build(self.input_dim, seed=self.seed)

    def loss(self) -> tf.keras.losses.Loss:
        return tf.keras.losses.MeanSquaredError()

    def input_spec(self) -> tuple[tf.TensorSpec, tf.TensorSpec]:
        return reconstruction_spec(self.input_dim)
