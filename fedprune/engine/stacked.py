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
  client's result does not depend on which other clients share the stack (drawn in one
  in-graph loop over the clients, ``tf.map_fn``: the same numbers as one draw per client,
  and a graph whose size does not grow with the clients).

Many clients: the clients train in *groups*, so that memory grows with the bytes of the models
and data, not with the clients times a step's activations (a stack of all 300 clients of 40
windows took 1.5 GB for one step's activations, 3,000 clients more than the machine had).
A group holds as many clients as fit ``ACTIVATION_BUDGET`` (200 MB) of one step's activations
at batch 32 (:func:`group_size`), at least ``MIN_GROUP`` (40), in as few groups of nearly
equal size as that allows; the last group is padded with clients that have no windows, which
sit every step out. Each epoch visits the groups in turn: a group's state is loaded into the
TensorFlow variables, trains the epoch and goes back to numpy, where every client's state is
held compactly:

* the weights as one float32 array [C, P] (P weights per model, once trained; before, the
  caller's start arrays are read, group by group, under their masks);
* the Adam moments only of the weights its mask keeps, float32 (the others are 0 after every
  step whatever their moments are, so a moment of a pruned weight never reaches a result; a
  reloaded group starts those at 0);
* each mask once (``distinct_masks``: one per cluster in CA-AFP), the clients an index into
  them; the step counts and seeds as integer arrays.

``client_weights`` returns read-only views of the weights array; training again writes a new
array, so the personal models of a shorter fine-tuning keep their values. Per client the
result is the same as in one stack of all clients up to float round-off: TensorFlow's
elementwise kernels take other vector paths at other tensor sizes (e.g. ``b1 ** t`` for a
[G] vector), a few 1e-7 after three epochs here. Federations of up to ``MIN_GROUP`` clients (the
built-in HAR datasets: UCI-HAR 30, WISDM 36) train as one group, exactly as before groups.

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
import hashlib
import sys
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import tensorflow as tf

from fedprune.sparsity.layers import prunable_mask_flags

_ACTIVATIONS = {"linear": tf.identity, "relu": tf.nn.relu}
_B1, _B2, _EPS = 0.9, 0.999, 1e-7  # Keras' Adam defaults
CONV_FORMULATIONS = ("grouped", "per-client")
ACTIVATION_BUDGET = 200 * 2**20  # bytes of activations one stacked step may hold
MIN_GROUP = 40  # clients one stacked step trains at least (module docstring, "Many clients")
REFERENCE_BATCH = 32  # fine-tuning's batch size (CA-AFP), for the group size


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


def activation_bytes(model: tf.keras.Model, batch_size: int = REFERENCE_BATCH) -> int:
    """Bytes one client adds to a stacked training step of ``batch_size`` windows: the input
    and every layer's output per window (float32), three times (the forward value, its
    gradient, and what the gradient keeps of the forward pass, e.g. ReLU's and max
    pooling's masks), calibrated on the HAR CNN (measured 4.8 MB per client at batch 32 of
    64 x 3 windows, 5.1 MB estimated)."""
    per_window = int(np.prod(model.input_shape[1:]))
    for layer in model.layers:
        if not isinstance(layer, tf.keras.layers.InputLayer):
            per_window += int(np.prod(layer.output_shape[1:]))
    return 3 * 4 * batch_size * per_window


def group_size(model: tf.keras.Model, clients: int, budget: int = ACTIVATION_BUDGET) -> int:
    """How many clients one stacked step trains together: as many as fit ``budget`` bytes of
    activations at batch :data:`REFERENCE_BATCH` (:func:`activation_bytes`) but at least
    :data:`MIN_GROUP`, and at most all ``clients``."""
    return max(1, min(clients, max(MIN_GROUP, budget // activation_bytes(model))))


class StackedModel:
    """C copies of one Keras layer stack with their own weights, masks and Adam states.

    The clients train in groups of ``group`` (module docstring, "Many clients"); between
    groups every client's state lives in numpy: its weights in one float32 array [C, P] (P
    weights per model), its Adam moments as float32 arrays of its kept weights only, its mask
    as an index into the distinct masks."""

    def __init__(
        self,
        model: tf.keras.Model,
        weights: Sequence[Sequence[np.ndarray]],
        kernel_masks: Sequence[Sequence[np.ndarray | None]] | None = None,
        seeds: Sequence[int] | None = None,
        learning_rate: float = 1e-3,
        conv: str = "auto",
        group: int | None = None,
    ):
        """``weights[c]`` is client c's ``model.get_weights()`` (read, not copied, until it
        trains); ``kernel_masks[c][j]`` the mask of the j-th prunable kernel
        (:func:`~fedprune.sparsity.layers.prunable_mask_flags`; None: unconstrained);
        ``seeds[c]`` its dropout seed; ``conv`` one of :data:`CONV_FORMULATIONS` or ``"auto"``
        (module docstring); ``group`` the most clients one step trains (default
        :func:`group_size`), in as few groups of nearly equal size as that allows."""
        if conv == "auto":
            conv = default_conv_formulation()
        elif conv not in CONV_FORMULATIONS:
            raise ValueError(f"conv must be 'auto' or one of {CONV_FORMULATIONS}, not {conv!r}")
        self.conv = conv
        self.ops = plan_of(model)
        self.clients = len(weights)
        if self.clients == 0:
            raise ValueError("stacked training needs at least one client")
        self.shapes = [tuple(w.shape) for w in model.get_weights()]
        n = len(self.shapes)
        if any(len(w) != n for w in weights):
            raise ValueError(f"every client needs {n} weight arrays (model.get_weights() order)")
        for c, ws in enumerate(weights):
            if any(np.shape(w) != shape for w, shape in zip(ws, self.shapes)):
                got = [tuple(np.shape(w)) for w in ws]
                raise ValueError(f"client {c}: weight shapes {got}, the model's {self.shapes}")
        sizes = [int(np.prod(s)) for s in self.shapes]
        self._offsets = np.cumsum([0, *sizes]).tolist()
        self.parameters = self._offsets[-1]
        flags = prunable_mask_flags(model)
        if len(flags) != n:
            raise ValueError("stacked training needs a model whose weights are all trainable")
        kernels = [i for i, prunable in enumerate(flags) if prunable]
        if kernel_masks is None:
            kernel_masks = [[None] * len(kernels) for _ in weights]
        if len(kernel_masks) != self.clients or any(len(m) != len(kernels) for m in kernel_masks):
            raise ValueError(f"every client needs {len(kernels)} kernel masks (None: no mask)")
        self.masked = [
            i for j, i in enumerate(kernels) if any(m[j] is not None for m in kernel_masks)
        ]
        self._distinct_masks(kernel_masks, kernels)
        self._start = weights  # the caller's arrays, read group by group until trained
        self._weights: np.ndarray | None = None  # [C, P] once trained
        self._lent = False  # client_weights() handed out views of self._weights
        self._m: list[np.ndarray] = []  # per distinct mask u: [clients with u, kept of u]
        self._v: list[np.ndarray] = []
        self._steps = np.zeros(self.clients, np.int64)  # each client's Adam step count
        seeds = list(range(self.clients)) if seeds is None else list(seeds)
        if len(seeds) != self.clients:
            raise ValueError(f"need one dropout seed per client ({self.clients})")
        self._seeds = np.asarray(seeds, np.int64)
        self.learning_rate = float(learning_rate)
        largest = group_size(model, self.clients) if group is None else int(group)
        if largest < 1:
            raise ValueError(f"group must be >= 1, got {group}")
        groups = -(-self.clients // largest)  # as few groups as fit, of (nearly) equal sizes
        self.group = g = -(-self.clients // groups)
        self.vars = [tf.Variable(tf.zeros((g, *s), tf.float32)) for s in self.shapes]
        self.m = [tf.Variable(tf.zeros_like(v)) for v in self.vars]
        self.v = [tf.Variable(tf.zeros_like(v)) for v in self.vars]
        self.t = tf.Variable(tf.zeros(g, tf.int64))
        self.seeds = tf.Variable(tf.zeros(g, tf.int64))
        self.masks = {i: tf.Variable(tf.ones((g, *self.shapes[i]))) for i in self.masked}
        self._resident: int | None = None  # the group whose state the variables hold
        self._shown: int | None = None  # ... whose weights they hold
        self._dirty = False  # ... trained since it was loaded
        self._step = tf.function(self._train_step, reduce_retracing=True)
        self._predict = tf.function(self._logits, reduce_retracing=True)
        self._put_weights_fn = tf.function(self._put_weights)
        self._put_state_fn = tf.function(self._put_state)
        self._get_state_fn = tf.function(self._get_state)

    # -- state between groups -----------------------------------------------------------------
    def _distinct_masks(
        self, kernel_masks: Sequence[Sequence[np.ndarray | None]], kernels: list[int]
    ) -> None:
        """``self._mask_table`` [U, P] (1 outside masked kernels), each client's row in it
        (``self._mask_of``) and its row among the clients sharing that mask (``self._row``),
        and each mask's kept positions (``self._kept``). Clients of one cluster share one
        mask; the same arrays are recognised at once, equal contents by their bytes."""
        by_identity: dict[tuple, int] = {}
        by_content: dict[bytes, int] = {}
        table: list[np.ndarray] = []
        self._mask_of = np.zeros(self.clients, np.int64)
        for c, masks in enumerate(kernel_masks):
            key = tuple(id(m) for m in masks)
            if key not in by_identity:
                flat = np.ones(self.parameters, np.float32)
                for j, i in enumerate(kernels):
                    if masks[j] is not None:
                        lo, hi = self._offsets[i], self._offsets[i + 1]
                        mask = np.asarray(masks[j], np.float32)
                        if mask.size != hi - lo:
                            raise ValueError(
                                f"client {c}: kernel mask {j} has {mask.size} values, the "
                                f"kernel {self.shapes[i]} has {hi - lo}"
                            )
                        flat[lo:hi] = mask.ravel()
                digest = hashlib.blake2b(flat.tobytes(), digest_size=16).digest()
                if digest not in by_content:
                    by_content[digest] = len(table)
                    table.append(flat)
                by_identity[key] = by_content[digest]
            self._mask_of[c] = by_identity[key]
        self._mask_table = np.stack(table)
        self._kept = [np.flatnonzero(row) for row in self._mask_table]
        self._row = np.zeros(self.clients, np.int64)
        for u in range(len(table)):
            members = np.flatnonzero(self._mask_of == u)
            self._row[members] = np.arange(len(members))
        self._members = [int(np.sum(self._mask_of == u)) for u in range(len(table))]

    @property
    def distinct_masks(self) -> int:
        """How many different masks the clients have (one per cluster in CA-AFP)."""
        return len(self._mask_table)

    @property
    def state_bytes(self) -> int:
        """Bytes of the clients' state held in numpy between groups: the weights [C, P]
        (once trained), the Adam moments of the kept weights, the distinct masks and their
        kept positions, the step counts and seeds (the variables of one group come on top)."""
        arrays = [self._mask_table, *self._kept, *self._m, *self._v, self._steps, self._seeds]
        if self._weights is not None:
            arrays.append(self._weights)
        return int(sum(a.nbytes for a in arrays))

    def _groups(self) -> range:
        return range(0, self.clients, self.group)

    def _clients_of(self, lo: int) -> np.ndarray:
        return np.arange(lo, min(lo + self.group, self.clients))

    def _flat_start(self, rows: np.ndarray) -> np.ndarray:
        """[len(rows), P] start weights of these clients under their masks."""
        flat = np.empty((len(rows), self.parameters), np.float32)
        for k, c in enumerate(rows):
            for i, w in enumerate(self._start[c]):
                flat[k, self._offsets[i] : self._offsets[i + 1]] = np.ravel(w)
        return flat * self._mask_table[self._mask_of[rows]]

    def _padded(self, flat: np.ndarray, fill: float = 0.0) -> np.ndarray:
        """[n, ...] rows of a group as the [G, ...] the variables hold (``fill`` after n)."""
        if len(flat) == self.group:
            return flat
        out = np.full((self.group, *flat.shape[1:]), fill, flat.dtype)
        out[: len(flat)] = flat
        return out

    def _put_weights(self, w: tf.Tensor) -> None:
        """The weight variables from [G, P] (one graph call instead of one per tensor)."""
        for i, var in enumerate(self.vars):
            part = w[:, self._offsets[i] : self._offsets[i + 1]]
            var.assign(tf.reshape(part, var.shape))

    def _put_state(
        self,
        w: tf.Tensor,
        m: tf.Tensor,
        v: tf.Tensor,
        mask: tf.Tensor,
        t: tf.Tensor,
        seeds: tf.Tensor,
    ) -> None:
        """Every variable of a group from [G, P] weights, moments and masks, [G] counts."""
        self._put_weights(w)
        for i in range(len(self.vars)):
            lo, hi = self._offsets[i], self._offsets[i + 1]
            self.m[i].assign(tf.reshape(m[:, lo:hi], self.m[i].shape))
            self.v[i].assign(tf.reshape(v[:, lo:hi], self.v[i].shape))
            if i in self.masks:
                self.masks[i].assign(tf.reshape(mask[:, lo:hi], self.masks[i].shape))
        self.t.assign(t)
        self.seeds.assign(seeds)

    def _get_state(self) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
        """[G, P] weights and moments and the [G] step counts of the group in the variables."""
        g = self.group
        flat = [
            tf.concat([tf.reshape(x, (g, -1)) for x in xs], 1) for xs in (self.vars, self.m, self.v)
        ]
        return (*flat, tf.identity(self.t))

    def _load(self, lo: int, training: bool = True) -> None:
        """Put the group starting at client ``lo`` in the variables (its weights, masks,
        moments, step counts and seeds; to predict, its weights only), storing the group
        there before if it trained."""
        if self._resident == lo or (not training and self._shown == lo):
            return
        self._store()
        rows = self._clients_of(lo)
        hi = lo + len(rows)
        if self._weights is None:
            w = self._padded(self._flat_start(rows))
        else:
            w = self._padded(self._weights[lo:hi])
        self._shown, self._resident = lo, None
        if not training:
            self._put_weights_fn(tf.constant(w))
            return
        m = np.zeros((self.group, self.parameters), np.float32)
        v = np.zeros((self.group, self.parameters), np.float32)
        if self._m:  # kept positions only; the others' moments never reach a weight
            for u, k, row in self._by_mask(rows):
                m[np.ix_(k, self._kept[u])] = self._m[u][row]
                v[np.ix_(k, self._kept[u])] = self._v[u][row]
        self._put_state_fn(
            tf.constant(w),
            tf.constant(m),
            tf.constant(v),
            tf.constant(self._padded(self._mask_table[self._mask_of[rows]], 1.0)),
            tf.constant(self._padded(self._steps[lo:hi])),
            tf.constant(self._padded(self._seeds[lo:hi])),
        )
        self._resident, self._dirty = lo, False

    def _store(self) -> None:
        """The resident group's trained state back into the numpy arrays."""
        if self._resident is None or not self._dirty:
            return
        lo = self._resident
        rows = self._clients_of(lo)
        n = len(rows)
        if self._weights is None:
            self._weights = np.empty((self.clients, self.parameters), np.float32)
            for other in self._groups():  # the groups that have not trained yet: their start
                if other != lo:
                    others = self._clients_of(other)
                    self._weights[others] = self._flat_start(others)
        elif self._lent:  # the arrays handed out keep their values
            self._weights = self._weights.copy()
        self._lent = False
        w, m, v, t = (x.numpy()[:n] for x in self._get_state_fn())
        self._weights[lo : lo + n] = w
        if not self._m:
            self._m = [np.zeros((c, len(k)), np.float32) for c, k in zip(self._members, self._kept)]
            self._v = [np.zeros_like(a) for a in self._m]
        for u, k, row in self._by_mask(rows):
            self._m[u][row] = m[np.ix_(k, self._kept[u])]
            self._v[u][row] = v[np.ix_(k, self._kept[u])]
        self._steps[lo : lo + n] = t
        self._dirty = False

    def _by_mask(self, rows: np.ndarray) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """(mask u, positions in ``rows``, rows among u's clients) per distinct mask."""
        of = self._mask_of[rows]
        for u in np.unique(of):
            k = np.flatnonzero(of == u)
            yield int(u), k, self._row[rows[k]]

    # -- forward ------------------------------------------------------------------------------
    def _dropout_keep(self, shape: tf.Tensor, rate: float, layer: int, axis: int) -> tf.Tensor:
        """Keep masks (client axis ``axis``) seeded by (client seed, client step, layer): one
        in-graph loop over the group's clients (``tf.map_fn``), each client's mask drawn as
        if alone (``stateless_uniform`` of its own shape and seed)."""
        per_client = tf.tensor_scatter_nd_update(shape, [[axis]], [1])
        seeds = tf.stack([self.seeds, self.t * 64 + layer], axis=1)  # [G, 2]
        draws = tf.map_fn(
            lambda seed: tf.random.stateless_uniform(per_client, seed),
            seeds,
            fn_output_signature=tf.float32,
        )  # [G, ..., 1 at axis, ...]
        draws = tf.squeeze(draws, axis + 1)
        rank = draws.shape.rank
        order = list(range(1, axis + 1)) + [0] + list(range(axis + 1, rank))
        return tf.cast(tf.transpose(draws, order) >= rate, tf.float32) / (1.0 - rate)

    def _logits(self, x: tf.Tensor, training: bool = False) -> tf.Tensor:
        """[G, B, ...] windows -> [G, B, classes] logits of the resident group. Inside, the
        client axis sits just before the features ([B, T, G, F] for convolutions, [B, G, F]
        for dense layers)."""
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
            elif op.kind == "average":  # [B, T, G, F] -> [B, G, F], the mean over time
                h = tf.reduce_mean(h, axis=1)
                axis = 1
            elif op.kind == "dropout" and training and op.rate > 0:
                h = h * self._dropout_keep(tf.shape(h), op.rate, layer, axis)
            if op.kind in ("conv", "dense") and op.activation != "softmax":
                h = _ACTIVATIONS[op.activation](h)
        return tf.transpose(h, (1, 0, 2))

    def _group_probabilities(self, lo: int, x: np.ndarray) -> np.ndarray:
        """Softmax outputs [n, B, classes] of the group at ``lo`` on its windows x [n, B, ...]."""
        self._load(lo, training=False)
        n = len(x)
        if n < self.group:
            x = np.concatenate([x, np.zeros((self.group - n, *x.shape[1:]), x.dtype)])
        return tf.nn.softmax(self._predict(tf.constant(x, tf.float32))).numpy()[:n]

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Softmax outputs [C, B, classes] of x [C, B, ...] (each client's own windows)."""
        if len(x) != self.clients:
            raise ValueError(f"need windows for each of the {self.clients} clients")
        return np.concatenate(
            [self._group_probabilities(lo, x[lo : lo + self.group]) for lo in self._groups()]
        )

    # -- training -----------------------------------------------------------------------------
    def _train_step(self, x: tf.Tensor, y: tf.Tensor, weight: tf.Tensor) -> None:
        """One Adam step for every client of the resident group with a batch (``weight``
        [G, B]: 1 real, 0 padding; a client with no real window sits the step out)."""
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
        on_progress: Callable[[float], None] | None = None,
    ) -> None:
        """``epochs`` epochs for every client on its own (x[c], y[c]); no shuffling when
        ``shuffle_rngs`` is None; ``on_epoch`` is called after each epoch of every client,
        ``on_progress(fraction)`` after each group's part of an epoch (the fractions of an
        epoch add up to 1: a progress bar over epochs with an estimate of the time left)."""
        if len(x) != self.clients or len(y) != self.clients:
            raise ValueError(f"need training data for each of the {self.clients} clients")
        sizes = [len(yc) for yc in y]
        if min(sizes) == 0:
            raise ValueError("every client needs at least one training window")
        single = self.clients <= self.group  # one group: its data and state stay put
        data = self._group_data(0, x, y) if single else None
        for _ in range(epochs):
            for lo in self._groups():
                rows = self._clients_of(lo)
                xs, ys = data if single else self._group_data(lo, x, y)
                self._load(lo)
                self._dirty = True
                rngs = None if shuffle_rngs is None else [shuffle_rngs[c] for c in rows]
                self._fit_group_epoch(xs, ys, [sizes[c] for c in rows], batch_size, rngs)
                if on_progress is not None:
                    on_progress(len(rows) / self.clients)
            if on_epoch is not None:
                on_epoch()
        self._store()

    def _group_data(
        self, lo: int, x: Sequence[np.ndarray], y: Sequence[np.ndarray]
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """The group's training windows and labels, [G, longest, ...] (zero-padded)."""
        rows = self._clients_of(lo)
        xs = _pad_stack([np.asarray(x[c], np.float32) for c in rows], self.group)
        ys = _pad_stack([np.asarray(y[c], np.int32) for c in rows], self.group)
        return tf.constant(xs), tf.constant(ys)

    def _fit_group_epoch(
        self,
        xs: tf.Tensor,
        ys: tf.Tensor,
        sizes: Sequence[int],
        batch_size: int,
        rngs: Sequence[np.random.Generator] | None,
    ) -> None:
        """One epoch of the resident group: each client's windows permuted by its own
        generator, cut into batches; padding clients (the last group's) sit it out."""
        steps = max(-(-n // batch_size) for n in sizes)
        index = np.zeros((self.group, steps * batch_size), np.int32)
        weight = np.zeros((self.group, steps * batch_size), np.float32)
        for c, n in enumerate(sizes):
            order = np.arange(n) if rngs is None else rngs[c].permutation(n)
            index[c, :n], weight[c, :n] = order, 1.0
        for s in range(steps):
            cols = slice(s * batch_size, (s + 1) * batch_size)
            idx = tf.constant(index[:, cols])
            self._step(
                tf.gather(xs, idx, batch_dims=1),
                tf.gather(ys, idx, batch_dims=1),
                tf.constant(weight[:, cols]),
            )

    def client_weights(self, c: int) -> list[np.ndarray]:
        """Client ``c``'s weights (``model.get_weights()`` order), read-only views of the
        stacked state: later training writes new arrays, never these."""
        self._store()
        if self._weights is None:
            flat = self._flat_start(np.array([c]))[0]
        else:
            flat, self._lent = self._weights[c], True
        out = []
        for i, shape in enumerate(self.shapes):
            view = flat[self._offsets[i] : self._offsets[i + 1]].reshape(shape)
            view.flags.writeable = False
            out.append(view)
        return out


def _pad_stack(arrays: Sequence[np.ndarray], count: int | None = None) -> np.ndarray:
    """Stack arrays of different lengths along a new client axis, zero-padded at the end
    (and with zero arrays up to ``count`` entries)."""
    longest = max(len(a) for a in arrays)
    count = len(arrays) if count is None else count
    out = np.zeros((count, longest) + np.asarray(arrays[0]).shape[1:], arrays[0].dtype)
    for c, a in enumerate(arrays):
        out[c, : len(a)] = a
    return out


def predict_each(
    stack: StackedModel, x: Sequence[np.ndarray], chunk: int = 256
) -> list[np.ndarray]:
    """Softmax outputs of client c's model on x[c], for every client: group by group, each
    group's windows zero-padded to its longest and passed ``chunk`` windows per client at a
    time."""
    if len(x) != stack.clients:
        raise ValueError(f"need windows for each of the {stack.clients} clients")
    out: list[np.ndarray] = []
    for lo in stack._groups():
        part = [np.asarray(a, np.float32) for a in x[lo : lo + stack.group]]
        padded = _pad_stack(part)
        probs = np.concatenate(
            [
                stack._group_probabilities(lo, padded[:, i : i + chunk])
                for i in range(0, padded.shape[1], chunk)
            ],
            axis=1,
        )
        out.extend(probs[c, : len(a)] for c, a in enumerate(part))
    return out
