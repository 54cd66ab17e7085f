"""Many clients' copies of one small Keras layer stack, trained at once (Phase 4's speed).

Fine-tuning (Eq. 12) trains every client's own copy of the CNN for E epochs with batch 32.
At that batch size a Keras step is mostly overhead and small-batch convolution gradients
(measured on this 2-core machine: ~10 ms per step of 32 windows, ~3 ms per step of 2, and
12,400 windows/s at batch 512 against 3,200 at batch 32). So the clients are *stacked*: every
weight gets a leading client axis, every layer is one computation over all clients (a
convolution is one grouped convolution, a dense layer one batched matrix product), and one
step trains every client on its own next batch.

Per client the result is Keras' ``compile(Adam(lr), sparse CE); fit(batch_size, shuffle)``
with a kernel mask constraint, step for step:

* each epoch the client's training windows are permuted (its own numpy generator) and cut into
  ``ceil(n / batch_size)`` batches, the last one partial; the loss is the batch mean of the
  cross entropy, computed from the logits as Keras does for a softmax output;
* Adam as in Keras 2.14 (``m += (g - m)(1 - b1)``, ``v += (g^2 - v)(1 - b2)``,
  ``w -= lr sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + eps)``) with the client's own step
  count ``t``: a client whose epoch is already over (it has fewer windows) sits the remaining
  steps of that epoch out, its weights and moments untouched;
* after every update a masked kernel is multiplied by its mask (``MaskConstraint``);
* inverted dropout whose keep masks come from ``(client seed, client step, layer)`` only, so a
  client's result does not depend on which other clients share the stack.

Convolutions come in two formulations (``conv=``), with the same results up to float round-off:

* ``"grouped"``: one grouped ``tf.nn.conv1d`` over all clients (group c: client c's channels).
  Its gradient exists on CPU only in TensorFlow's oneDNN kernels, which TF 2.14 turns on by
  default only on CPUs with AVX-512 VNNI / BF16 / AMX (elsewhere: ``TF_ENABLE_ONEDNN_OPTS=1``).
* ``"per-client"``: one ``tf.nn.conv1d`` per client, run side by side in one graph; works on
  every CPU. ``make bench`` (30 UCI-HAR clients x 25 epochs, 2-core AMD EPYC): 77.6 s with
  oneDNN off, against 34.6 s grouped with oneDNN on (55.6 s per client). Slower fallbacks
  measured (DEVELOPERS.md): im2col patches times a batched kernel, a custom gradient from
  grouped forward convolutions.

``conv="auto"`` (the default) probes once per process whether the grouped gradient runs
(:func:`grouped_conv_gradient_available`) and otherwise uses ``"per-client"``, saying so in
one line on stderr.

What differs from Keras: the random streams (shuffle order, dropout masks), and float round-off
from the batched products. tests/engine/test_stacked.py checks, with dropout off and no
shuffle, that the stacked weights after two epochs equal Keras ``fit`` per client.

Supported models take windows (batch, steps, channels). Supported layers (anything else is
refused with the layer's name): InputLayer, Conv1D (stride
1, no dilation, ``same`` or ``valid``), MaxPooling1D (``valid``, strides = pool size), Dropout,
Flatten, GlobalAveragePooling1D, Dense; activations linear/relu, and softmax on the last layer
only.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from fedprune.sparsity.layers import prunable_mask_flags

_ACTIVATIONS = {"linear": tf.identity, "relu": tf.nn.relu}
_B1, _B2, _EPS = 0.9, 0.999, 1e-7  # Keras' Adam defaults
CONV_FORMULATIONS = ("grouped", "per-client")


@functools.cache
def grouped_conv_gradient_available() -> bool:
    """Whether this process's TensorFlow computes gradients of grouped 1D convolutions.

    TF 2.14 has them on CPU only in its oneDNN kernels (on by default only on CPUs with
    AVX-512 VNNI / BF16 / AMX, or with ``TF_ENABLE_ONEDNN_OPTS=1`` exported before TensorFlow
    is imported). Probed once with a 2-group convolution."""
    x = tf.zeros((1, 4, 4))
    kernel = tf.zeros((3, 2, 4))  # 2 input channels per group -> 2 groups
    try:
        with tf.GradientTape() as tape:
            tape.watch([x, kernel])
            y = tf.nn.conv1d(x, kernel, 1, "SAME")
        tape.gradient(y, [x, kernel])
    except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError):
        return False
    return True


@functools.cache
def default_conv_formulation() -> str:
    """``"grouped"`` where its gradient runs, else ``"per-client"`` (said once on stderr)."""
    if grouped_conv_gradient_available():
        return "grouped"
    print(
        "fedprune: note: TensorFlow runs without its oneDNN kernels here, so stacked training "
        "uses one convolution per client: fine-tuning takes about 2.2x as long as with "
        "TF_ENABLE_ONEDNN_OPTS=1 (set before TensorFlow is imported; `make bench` measures both)",
        file=sys.stderr,
    )
    return "per-client"


@dataclasses.dataclass(frozen=True)
class _Op:
    kind: str  # conv, pool, dropout, flatten, average, dense
    size: int = 0  # kernel size, pool size
    same: bool = False  # conv padding
    rate: float = 0.0  # dropout rate
    activation: str = "linear"


def _activation_name(layer: tf.keras.layers.Layer) -> str:
    return tf.keras.activations.serialize(layer.activation)


def plan_of(model: tf.keras.Model) -> list[_Op]:
    """The model's layers as stacked operations; ValueError naming an unsupported layer."""
    L = tf.keras.layers
    if len(model.input_shape) != 3:
        raise ValueError(
            f"stacked training needs (batch, steps, channels) inputs, not {model.input_shape}"
        )
    ops: list[_Op] = []
    for layer in model.layers:
        name = f"layer {layer.name!r} ({type(layer).__name__})"
        if isinstance(layer, L.InputLayer):
            continue
        if isinstance(layer, L.Conv1D) and type(layer) is L.Conv1D:
            if layer.strides != (1,) or layer.dilation_rate != (1,) or layer.groups != 1:
                raise ValueError(f"{name}: stacked training needs stride 1, no dilation, 1 group")
            if layer.padding not in ("same", "valid") or not layer.use_bias:
                raise ValueError(f"{name}: stacked training needs same/valid padding and a bias")
            ops.append(_Op("conv", layer.kernel_size[0], layer.padding == "same"))
            ops[-1] = dataclasses.replace(ops[-1], activation=_activation_name(layer))
        elif isinstance(layer, L.MaxPooling1D):
            if layer.padding != "valid" or layer.strides != layer.pool_size:
                raise ValueError(f"{name}: stacked training needs valid pooling, strides = size")
            ops.append(_Op("pool", layer.pool_size[0]))
        elif isinstance(layer, L.Dropout):
            ops.append(_Op("dropout", rate=float(layer.rate)))
        elif isinstance(layer, L.Flatten):
            ops.append(_Op("flatten"))
        elif isinstance(layer, L.GlobalAveragePooling1D) and not layer.keepdims:
            ops.append(_Op("average"))
        elif isinstance(layer, L.Dense) and layer.use_bias:
            ops.append(_Op("dense", activation=_activation_name(layer)))
        else:
            raise ValueError(f"{name} is not supported by stacked training")
        act = ops[-1].activation
        if act not in _ACTIVATIONS and not (act == "softmax" and layer is model.layers[-1]):
            raise ValueError(f"{name}: activation {act!r} is not supported by stacked training")
    if not ops or ops[-1].kind != "dense" or ops[-1].activation != "softmax":
        raise ValueError("stacked training needs a model that ends in a softmax Dense layer")
    return ops


def _conv(x: tf.Tensor, kernel: tf.Tensor, bias: tf.Tensor, op: _Op, how: str) -> tf.Tensor:
    """x [B, T, C, F], kernel [C, k, F, O] -> [B, T', C, O] (Keras Conv1D, stride 1).

    ``how="grouped"``: one grouped convolution (group c: client c's F input and O output
    channels); ``"per-client"``: one convolution per client, stacked."""
    padding = "SAME" if op.same else "VALID"
    c, k, f, o = kernel.shape
    if how == "per-client":
        y = tf.stack([tf.nn.conv1d(x[:, :, i], kernel[i], 1, padding) for i in range(c)], 2)
        return y + bias
    shape = tf.shape(x)
    grouped = tf.reshape(tf.transpose(kernel, (1, 2, 0, 3)), (k, f, c * o))
    y = tf.nn.conv1d(tf.reshape(x, (shape[0], shape[1], c * f)), grouped, 1, padding)
    return tf.reshape(y, (shape[0], y.shape[1] or tf.shape(y)[1], c, o)) + bias


def _pool(x: tf.Tensor, size: int) -> tf.Tensor:
    """[B, T, C, O] -> [B, T // size, C, O], max over windows of ``size`` steps."""
    steps = x.shape[1] // size
    x = x[:, : steps * size]
    shape = tf.shape(x)
    return tf.reduce_max(tf.reshape(x, (shape[0], steps, size, x.shape[2], x.shape[3])), axis=2)


class StackedModel:
    """C copies of one Keras layer stack with their own weights, masks and Adam states."""

    def __init__(
        self,
        model: tf.keras.Model,
        weights: Sequence[Sequence[np.ndarray]],
        kernel_masks: Sequence[Sequence[np.ndarray | None]] | None = None,
        seeds: Sequence[int] | None = None,
        learning_rate: float = 1e-3,
        conv: str = "auto",
    ):
        """``weights[c]`` is client c's ``model.get_weights()``; ``kernel_masks[c][j]`` the mask
        of the j-th prunable kernel (:func:`~fedprune.sparsity.layers.prunable_mask_flags`;
        None: unconstrained); ``seeds[c]`` its dropout seed;
        ``conv`` one of :data:`CONV_FORMULATIONS` or ``"auto"`` (module docstring)."""
        if conv == "auto":
            conv = default_conv_formulation()
        elif conv not in CONV_FORMULATIONS:
            raise ValueError(f"conv must be 'auto' or one of {CONV_FORMULATIONS}, not {conv!r}")
        self.conv = conv
        self.ops = plan_of(model)
        self.clients = len(weights)
        if self.clients == 0:
            raise ValueError("stacked training needs at least one client")
        n = len(model.get_weights())
        if any(len(w) != n for w in weights):
            raise ValueError(f"every client needs {n} weight arrays (model.get_weights() order)")
        self.vars = [
            tf.Variable(np.stack([np.asarray(w[i], np.float32) for w in weights])) for i in range(n)
        ]
        flags = prunable_mask_flags(model)
        if len(flags) != n:
            raise ValueError("stacked training needs a model whose weights are all trainable")
        kernels = [i for i, prunable in enumerate(flags) if prunable]
        if kernel_masks is None:
            kernel_masks = [[None] * len(kernels) for _ in weights]
        if len(kernel_masks) != self.clients or any(len(m) != len(kernels) for m in kernel_masks):
            raise ValueError(f"every client needs {len(kernels)} kernel masks (None: no mask)")
        self.masks: dict[int, tf.Tensor] = {}
        for j, i in enumerate(kernels):
            per_client = [m[j] for m in kernel_masks]
            if all(m is None for m in per_client):
                continue
            self.masks[i] = tf.constant(
                np.stack(
                    [
                        np.ones(self.vars[i].shape[1:], np.float32)
                        if m is None
                        else np.asarray(m, np.float32).reshape(self.vars[i].shape[1:])
                        for m in per_client
                    ]
                )
            )
            self.vars[i].assign(self.vars[i] * self.masks[i])
        self.m = [tf.Variable(tf.zeros_like(v)) for v in self.vars]
        self.v = [tf.Variable(tf.zeros_like(v)) for v in self.vars]
        self.t = tf.Variable(tf.zeros(self.clients, tf.int64))
        seeds = list(range(self.clients)) if seeds is None else list(seeds)
        self.seeds = tf.constant(np.asarray(seeds, np.int64))
        self.learning_rate = float(learning_rate)
        self._step = tf.function(self._train_step, reduce_retracing=True)
        self._predict = tf.function(self._logits, reduce_retracing=True)

    # -- forward ------------------------------------------------------------------------------
    def _dropout_keep(self, shape: tf.Tensor, rate: float, layer: int, axis: int) -> tf.Tensor:
        """Keep masks (client axis ``axis``) seeded by (client seed, client step, layer)."""
        per_client = tf.tensor_scatter_nd_update(shape, [[axis]], [1])
        keeps = []
        for c in range(self.clients):
            seed = tf.stack([self.seeds[c], self.t[c] * 64 + layer])
            keeps.append(tf.random.stateless_uniform(per_client, seed) >= rate)
        return tf.cast(tf.concat(keeps, axis), tf.float32) / (1.0 - rate)

    def _logits(self, x: tf.Tensor, training: bool = False) -> tf.Tensor:
        """[C, B, ...] windows -> [C, B, classes] logits. Inside, the client axis sits just
        before the features ([B, T, C, F] for convolutions, [B, C, F] for dense layers)."""
        h, w, axis = tf.transpose(x, (1, 2, 0, 3)), 0, 2
        for layer, op in enumerate(self.ops):
            if op.kind == "conv":
                h = _conv(h, self.vars[w], self.vars[w + 1], op, self.conv)
                w += 2
            elif op.kind == "dense":
                h = tf.einsum("bci,cio->bco", h, self.vars[w]) + self.vars[w + 1]
                w += 2
            elif op.kind == "pool":
                h = _pool(h, op.size)
            elif op.kind == "flatten":
                shape = tf.shape(h)
                steps, c, f = h.shape[1:]
                h = tf.reshape(tf.transpose(h, (0, 2, 1, 3)), (shape[0], c, steps * f))
                axis = 1
            elif op.kind == "average":  # [B, T, C, F] -> [B, C, F], the mean over time
                h = tf.reduce_mean(h, axis=1)
                axis = 1
            elif op.kind == "dropout" and training and op.rate > 0:
                h = h * self._dropout_keep(tf.shape(h), op.rate, layer, axis)
            if op.kind in ("conv", "dense") and op.activation != "softmax":
                h = _ACTIVATIONS[op.activation](h)
        return tf.transpose(h, (1, 0, 2))

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Softmax outputs [C, B, classes] of x [C, B, ...] (each client's own windows)."""
        return tf.nn.softmax(self._predict(tf.constant(x, tf.float32))).numpy()

    # -- training -----------------------------------------------------------------------------
    def _train_step(self, x: tf.Tensor, y: tf.Tensor, weight: tf.Tensor) -> None:
        """One Adam step for every client with a batch (``weight`` [C, B]: 1 real, 0 padding)."""
        count = tf.reduce_sum(weight, axis=1)
        active = count > 0
        with tf.GradientTape() as tape:
            ce = tf.nn.sparse_softmax_cross_entropy_with_logits(y, self._logits(x, True))
            loss = tf.reduce_sum(tf.reduce_sum(ce * weight, axis=1) / tf.maximum(count, 1.0))
        grads = tape.gradient(loss, self.vars)
        t = self.t + tf.cast(active, tf.int64)
        tf_ = tf.cast(tf.maximum(t, 1), tf.float32)
        alpha = self.learning_rate * tf.sqrt(1.0 - _B2**tf_) / (1.0 - _B1**tf_)
        for i, (var, g, m, v) in enumerate(zip(self.vars, grads, self.m, self.v)):
            expand = (-1,) + (1,) * (var.shape.rank - 1)
            on = tf.reshape(active, expand)
            m_new = m + (g - m) * (1.0 - _B1)
            v_new = v + (tf.square(g) - v) * (1.0 - _B2)
            w_new = var - tf.reshape(alpha, expand) * m_new / (tf.sqrt(v_new) + _EPS)
            if i in self.masks:
                w_new = w_new * self.masks[i]
            m.assign(tf.where(on, m_new, m))
            v.assign(tf.where(on, v_new, v))
            var.assign(tf.where(on, w_new, var))
        self.t.assign(t)

    def fit_epochs(
        self,
        x: Sequence[np.ndarray],
        y: Sequence[np.ndarray],
        epochs: int,
        batch_size: int,
        shuffle_rngs: Sequence[np.random.Generator] | None,
        on_epoch: Callable[[], None] | None = None,
    ) -> None:
        """``epochs`` epochs for every client on its own (x[c], y[c]); no shuffling when
        ``shuffle_rngs`` is None; ``on_epoch`` is called after each epoch (progress)."""
        if len(x) != self.clients or len(y) != self.clients:
            raise ValueError(f"need training data for each of the {self.clients} clients")
        sizes = [len(yc) for yc in y]
        if min(sizes) == 0:
            raise ValueError("every client needs at least one training window")
        xs = tf.constant(_pad_stack(x))
        ys = tf.constant(_pad_stack([np.asarray(yc, np.int32) for yc in y]))
        steps = max(-(-n // batch_size) for n in sizes)
        for _ in range(epochs):
            index = np.zeros((self.clients, steps * batch_size), np.int32)
            weight = np.zeros((self.clients, steps * batch_size), np.float32)
            for c, n in enumerate(sizes):
                order = np.arange(n) if shuffle_rngs is None else shuffle_rngs[c].permutation(n)
                index[c, :n], weight[c, :n] = order, 1.0
            for s in range(steps):
                cols = slice(s * batch_size, (s + 1) * batch_size)
                idx = tf.constant(index[:, cols])
                self._step(
                    tf.gather(xs, idx, batch_dims=1),
                    tf.gather(ys, idx, batch_dims=1),
                    tf.constant(weight[:, cols]),
                )
            if on_epoch is not None:
                on_epoch()

    def client_weights(self, c: int) -> list[np.ndarray]:
        return [v[c].numpy() for v in self.vars]


def _pad_stack(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """Stack arrays of different lengths along a new client axis, zero-padded at the end."""
    longest = max(len(a) for a in arrays)
    out = np.zeros((len(arrays), longest) + np.asarray(arrays[0]).shape[1:], arrays[0].dtype)
    for c, a in enumerate(arrays):
        out[c, : len(a)] = a
    return out


def predict_each(
    stack: StackedModel, x: Sequence[np.ndarray], chunk: int = 256
) -> list[np.ndarray]:
    """Softmax outputs of client c's model on x[c], for every client."""
    padded = _pad_stack([np.asarray(a, np.float32) for a in x])
    parts = [stack.predict(padded[:, i : i + chunk]) for i in range(0, padded.shape[1], chunk)]
    probs = np.concatenate(parts, axis=1)
    return [probs[c, : len(a)] for c, a in enumerate(x)]
