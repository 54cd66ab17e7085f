"""Structured masks (``--structure filters``, our extension): whole filters and units.

The paper prunes single weights (Eq. 7); its scores (Eq. 8-11) and its prune-and-heal schedule
(Alg. 1 lines 41-50) are per weight. A per-weight mask leaves the tensors' shapes as they are,
so a device still runs the dense kernels. Here a mask removes whole output units: the filters
of a convolution, the units of a dense layer, and with each the input rows of the next kernel
that read it, so that :mod:`edge_export.compact` can build the physically smaller model.

**Units.** A *group* is one layer's outputs whose units can go: its kernel (the *producer*)
feeds, through layers that keep channels last and act per channel (activations, dropout,
pooling, padding, ``Flatten``, ``BatchNormalization``, ``GroupNormalization`` of one channel
per group, ``LayerNormalization`` over other axes), exactly one other kernel (the *consumer*).
Unit j of the group is the producer kernel's column j (``kernel[..., j]``) and the consumer's
input rows that read channel j (``kernel[..., r, :]`` with ``r % units == j``: after
``Flatten`` of a (time, channels) tensor, row t * channels + j). A kernel without a consumer
(the classifier, a model's last layer) keeps all its outputs: the classes are never pruned.
A producer whose outputs are mixed across channels before the consumer (``LayerNormalization``
over the channels, ``GroupNormalization`` of several channels per group, a softmax) keeps its
units too: removing a channel there changes the others' values, so no smaller model would
compute the masked one. Any other layer between a pruned kernel and its consumer (``Add``,
``Concatenate``, ``Reshape``, recurrent or custom layers) is one :class:`ConfigError` naming it.

**Masks.** The kernel masks stay per weight (the pipeline, checkpoints, fine-tuning and
``masks.npz`` are unchanged): a kernel's mask is the outer product of its kept input channels
(its producer group's units) and its kept outputs (its own group's units), and a unit is kept
where its producer column has any active weight. The removed unit's bias stays; its output,
act(b_j), is constant and reaches nothing, because every row that reads it is masked.

**Scores (interpretation).** A unit's importance is the *mean* of Eq. 8's per-weight scores
over its active kernel column (its live fan-in), and its regrowth score the mean |gradient|
over every weight it controls (its column and the consumer rows that read it: a removed unit's
own column gets no gradient, its outgoing rows do where act(b_j) != 0). The mean, not the sum:
the layers' fan-ins differ by 45x in the paper's model (conv1 45, conv2 320, dense 2,048), so
with one global ranking a sum ranks units by their layer's fan-in, not by their weights
(measured in docs/caafp.md, "Structured pruning"); within one layer both rank alike.

**Budget (interpretation).** ``target`` is the fraction of *units* removed (filters and units
over all groups), and the schedule's counts N_total, N_active, N_churn and N_deficit
(Alg. 1 lines 42-47) count units. ``budget="global"`` ranks all groups' units together (the
paper's one ranking, Eq. 9 still normalized by the model-wide maximum); ``"layerwise"``
prunes every group to the target on its own. No group loses its last unit. The weights
removed follow: a unit removes its column and its outgoing rows, so at 70 % of the units about
1 - 0.3 x 0.3 = 91 % of a middle kernel's weights go.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from fedprune.errors import ConfigError
from fedprune.sparsity.masks import check_budget
from fedprune.sparsity.schedule import PruneHealSchedule

STRUCTURES = ("weights", "filters")  # fedprune.configs.pipeline mirrors this (tests agree)

# layers that keep channels last and act on each channel alone (per position or per channel)
ELEMENTWISE = frozenset(
    {
        "Dropout", "SpatialDropout1D", "SpatialDropout2D", "GaussianNoise", "GaussianDropout",
        "AlphaDropout", "ActivityRegularization", "ReLU", "LeakyReLU", "ELU", "ThresholdedReLU",
        "PReLU", "MaxPooling1D", "MaxPooling2D", "AveragePooling1D", "AveragePooling2D",
        "GlobalMaxPooling1D", "GlobalMaxPooling2D", "GlobalAveragePooling1D",
        "GlobalAveragePooling2D", "ZeroPadding1D", "ZeroPadding2D", "Cropping1D", "Cropping2D",
        "UpSampling1D", "UpSampling2D", "Flatten", "BatchNormalization",
    }
)  # fmt: skip
KERNEL_LAYERS = frozenset({"Dense", "Conv1D", "Conv2D"})  # producers and consumers


@dataclasses.dataclass(frozen=True)
class Group:
    """One layer's prunable units: ``producer`` (its kernel's index among the kernels the
    masks cover) and ``consumer`` (the kernel that reads them), with the layers between."""

    layer: str
    producer: int
    consumer: int
    consumer_layer: str
    units: int
    through: tuple[str, ...]

    def rows(self, consumer_shape: tuple[int, ...]) -> np.ndarray:
        """The unit each input row of the consumer kernel reads (its axis -2)."""
        return np.arange(consumer_shape[-2]) % self.units


@dataclasses.dataclass(frozen=True)
class UnitGraph:
    """The groups of a model's kernels (``shapes``: the covered kernels, in weight order)
    and the kernels whose outputs stay whole, with the reason (``kept``)."""

    shapes: tuple[tuple[int, ...], ...]
    groups: tuple[Group, ...]
    kept: tuple[tuple[str, str], ...]

    @property
    def n_units(self) -> int:
        return sum(g.units for g in self.groups)


def _kind(layer: object) -> str:
    return type(layer).__name__


def _cross_channel(layer: object) -> str | None:
    """Why ``layer`` mixes its channels (so its producer keeps its units), else ``None``."""
    kind, config = _kind(layer), layer.get_config()
    if kind == "Activation" and config.get("activation") == "softmax":
        return f"{layer.name!r} (a softmax over the channels) follows it"
    if kind == "LayerNormalization":
        rank = len(layer.input_shape)
        axes = config["axis"] if isinstance(config["axis"], list) else [config["axis"]]
        if rank - 1 in [a % rank for a in axes]:
            return f"{layer.name!r} (LayerNormalization over the channels) follows it"
    if kind == "GroupNormalization" and config["groups"] not in (-1, layer.input_shape[-1]):
        return f"{layer.name!r} (GroupNormalization of several channels per group) follows it"
    if kind == "UnitNormalization":
        return f"{layer.name!r} (UnitNormalization) follows it"
    return None


def _passes(layer: object) -> bool:
    kind = _kind(layer)
    if kind in ("Activation", "LayerNormalization", "GroupNormalization", "UnitNormalization"):
        return True
    config = layer.get_config()
    if kind == "BatchNormalization":  # per channel only when it normalizes the last axis
        axes = config["axis"] if isinstance(config["axis"], list) else [config["axis"]]
        rank = len(layer.input_shape)
        return [a % rank for a in axes] == [rank - 1]
    return kind in ELEMENTWISE and config.get("data_format", "channels_last") == "channels_last"


def _kernel_layer_ok(layer: object) -> bool:
    config = layer.get_config()
    plain = config.get("groups", 1) == 1 and config.get("data_format") in (None, "channels_last")
    return _kind(layer) in KERNEL_LAYERS and plain


def _consumers(model: object, layer: object) -> list:
    members = {id(x) for x in model.layers}
    return [n.outbound_layer for n in layer.outbound_nodes if id(n.outbound_layer) in members]


def unit_graph(model: object, covered: Sequence[bool], strict: bool = True) -> UnitGraph:
    """The groups of ``model`` (a ``tf.keras.Model``) among the kernels marked in ``covered``
    (flags over ``model.trainable_weights``, as :func:`fedprune.sparsity.layers.scope_flags`).

    ``strict`` (training): a layer on a covered kernel's path that is not supported, or a
    consumer outside ``covered``, is a :class:`ConfigError` naming it. Otherwise (compaction
    of a finished run) that kernel keeps its units, with the reason in ``kept``.
    """
    owners = [(layer, w) for layer in model.layers for w in layer.trainable_weights]
    if len(owners) != len(covered):
        raise ValueError(f"{len(covered)} flags for {len(owners)} trainable weights")
    index = {}  # id(layer) -> index of its kernel among the covered ones
    shapes = []
    for (layer, w), flag in zip(owners, covered):
        if flag:
            index[id(layer)] = len(shapes)
            shapes.append(tuple(int(s) for s in w.shape))
    groups, kept = [], []

    def refuse(layer: object, reason: str) -> None:
        if strict:
            raise ConfigError(f"--structure filters: {reason}; {_FIX}")
        kept.append((layer.name, reason))

    for layer in model.layers:
        if id(layer) not in index:
            continue
        if not _kernel_layer_ok(layer):
            refuse(layer, f"layer {layer.name!r} ({_kind(layer)}) cannot lose whole units")
            continue
        outcome, node, through = _follow(model, layer, index)
        if outcome == "consumer" and layer.get_config().get("activation") == "softmax":
            kept.append((layer.name, "its softmax mixes its outputs"))
        elif outcome == "refuse":
            refuse(layer, node)
        elif outcome in ("kept", "output"):
            kept.append((layer.name, node))
        elif id(node) not in index:
            refuse(
                node,
                f"{layer.name!r} loses whole units only with the input rows of {node.name!r} "
                f"that read them: prune {node.name!r} too",
            )
        elif not _kernel_layer_ok(node):
            refuse(node, f"layer {node.name!r} ({_kind(node)}) cannot lose input channels")
        else:
            units = shapes[index[id(layer)]][-1]
            producer, consumer = index[id(layer)], index[id(node)]
            groups.append(Group(layer.name, producer, consumer, node.name, units, through))
    if strict and not groups:
        raise ConfigError(
            "--structure filters: none of the pruned kernels has outputs another pruned kernel "
            f"reads (the classifier's outputs are never pruned); {_FIX}"
        )
    return UnitGraph(tuple(shapes), tuple(groups), tuple(kept))


_FIX = "give --prune-layers without it, or --structure weights"


def _follow(model: object, layer: object, index: dict) -> tuple[str, object, tuple[str, ...]]:
    """Where ``layer``'s outputs go: ``("consumer", layer, through)`` (the next kernel layer),
    ``("output", reason, through)``, ``("kept", reason, through)`` (its channels are mixed) or
    ``("refuse", reason, through)`` (an unsupported layer or a branch)."""
    node, through = layer, []
    while True:
        nxt = _consumers(model, node)
        if not nxt:
            return "output", "its outputs are the model's (the classes stay)", tuple(through)
        if len(nxt) > 1:
            names = ", ".join(repr(n.name) for n in nxt)
            return "refuse", f"the outputs of {node.name!r} feed several layers ({names})", ()
        node = nxt[0]
        if id(node) in index or _kind(node) in KERNEL_LAYERS:
            return "consumer", node, tuple(through)
        if not _passes(node):
            why = f"layer {node.name!r} ({_kind(node)}) after {layer.name!r} is not supported"
            return "refuse", why, ()
        mixes = _cross_channel(node)
        if mixes is not None:
            return "kept", mixes, ()
        through.append(node.name)


def unit_masks(graph: UnitGraph, masks: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Which units of every group are kept: those whose producer column has an active weight."""
    return [_columns(masks[g.producer]).any(axis=0) for g in graph.groups]


def _columns(kernel: np.ndarray) -> np.ndarray:
    """A kernel as (fan_in, units)."""
    return np.asarray(kernel).reshape(-1, kernel.shape[-1]) > 0


def weight_masks(graph: UnitGraph, keep: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The kernel masks of the kept units ``keep`` (one boolean array per group): each
    kernel's mask is its kept input rows times its kept outputs (float32, kernel shapes)."""
    outs = [np.ones(s[-1], bool) for s in graph.shapes]
    ins = [np.ones(s[-2], bool) for s in graph.shapes]
    for g, k in zip(graph.groups, keep):
        outs[g.producer] = outs[g.producer] & k
        ins[g.consumer] = ins[g.consumer] & k[g.rows(graph.shapes[g.consumer])]
    return [
        np.broadcast_to(i[:, None] & o[None, :], s).astype(np.float32)
        for s, i, o in zip(graph.shapes, ins, outs)
    ]


def unit_scores(
    graph: UnitGraph, scores: Sequence[np.ndarray], masks: Sequence[np.ndarray]
) -> list[np.ndarray]:
    """Every unit's importance: the mean per-weight score (Eq. 8) over its active column."""
    pooled = []
    for g in graph.groups:
        s = np.asarray(scores[g.producer], np.float64).reshape(-1, graph.shapes[g.producer][-1])
        m = _columns(masks[g.producer])
        pooled.append((s * m).sum(axis=0) / np.maximum(m.sum(axis=0), 1))
    return pooled


def regrow_scores(graph: UnitGraph, grads: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Every unit's regrowth score: mean |gradient| over its column and the consumer rows
    that read it (all the weights the unit controls)."""
    pooled = []
    for g in graph.groups:
        column = np.abs(np.asarray(grads[g.producer], np.float64)).reshape(-1, g.units)
        shape = graph.shapes[g.consumer]
        rows = np.abs(np.asarray(grads[g.consumer], np.float64))
        rows = np.moveaxis(rows, -2, 0).reshape(shape[-2], -1)  # one line per input row
        reads = g.rows(shape)
        outgoing = np.bincount(reads, weights=rows.sum(axis=1), minlength=g.units)
        size = column.shape[0] + np.bincount(reads, minlength=g.units) * rows.shape[1]
        pooled.append((column.sum(axis=0) + outgoing) / size)
    return pooled


def unit_sparsity(graph: UnitGraph, masks: Sequence[np.ndarray]) -> float:
    """Fraction of the groups' units removed."""
    keep = unit_masks(graph, masks)
    return 1.0 - sum(int(k.sum()) for k in keep) / graph.n_units


def _choose(order: np.ndarray, group_of: np.ndarray, left: np.ndarray, n: int) -> list[int]:
    """The first ``n`` units of ``order`` whose group keeps at least one unit without them."""
    chosen = []
    for u in order:
        if len(chosen) >= n:
            break
        if left[group_of[u]] > 1:
            left[group_of[u]] -= 1
            chosen.append(int(u))
    return chosen


def _step(
    keep: np.ndarray,
    group_of: np.ndarray,
    score: np.ndarray,
    grow_score: np.ndarray,
    n_prune: int,
    n_grow: int,
) -> np.ndarray:
    """Alg. 1 lines 48-50 on units: drop the ``n_prune`` lowest-score kept units (never a
    group's last), then keep again the ``n_grow`` removed units with the largest regrowth
    score (only from those removed before this step). Stable sorts: ties by position."""
    left = np.bincount(group_of, weights=keep, minlength=group_of.max() + 1).astype(int)
    active = np.flatnonzero(keep)
    pruned = _choose(active[np.argsort(score[active], kind="stable")], group_of, left, n_prune)
    inactive = np.flatnonzero(~keep)
    grown = inactive[np.argsort(-grow_score[inactive], kind="stable")][: max(n_grow, 0)]
    new = keep.copy()
    new[pruned] = False
    new[grown] = True
    return new


@dataclasses.dataclass(frozen=True)
class StructuredMasks:
    """The mask rule of ``--structure filters`` for the pipeline's mask policies: the same
    prune-to and prune-and-heal steps as :mod:`fedprune.sparsity.masks`, on units."""

    graph: UnitGraph
    budget: str = "global"

    def __post_init__(self) -> None:
        check_budget(self.budget)

    def _flat(self, per_group: Sequence[np.ndarray]) -> np.ndarray:
        return np.concatenate([np.asarray(v) for v in per_group])

    def _split(self, flat: np.ndarray) -> list[np.ndarray]:
        cuts = np.cumsum([g.units for g in self.graph.groups])[:-1]
        return np.split(flat, cuts)

    def _parts(self) -> list[np.ndarray]:
        """Unit indices of each part the budget counts: all groups, or every group."""
        every = np.arange(self.graph.n_units)
        return [every] if self.budget == "global" else self._split(every)

    def prune_to(
        self, masks: Sequence[np.ndarray], scores: Sequence[np.ndarray], target: float
    ) -> list[np.ndarray]:
        """Remove the lowest-score kept units until ``target`` of the units are gone."""
        keep = self._flat(unit_masks(self.graph, masks))
        score = self._flat(unit_scores(self.graph, scores, masks))
        group_of = self._group_of()
        for part in self._parts():
            n_prune = int(keep[part].sum()) - int(round((1.0 - target) * part.size))
            keep[part] = _step(keep[part], group_of[part], score[part], score[part], n_prune, 0)
        return weight_masks(self.graph, self._split(keep))

    def heal(
        self,
        schedule: PruneHealSchedule,
        t: int,
        masks: Sequence[np.ndarray],
        scores: Sequence[np.ndarray],
        grads: Sequence[np.ndarray],
    ) -> list[np.ndarray]:
        """One prune-and-heal step (Alg. 1 lines 41-50) at Phase-3 round ``t``, counted in
        units: the schedule's N_prune lowest-score kept units go, its N_grow removed units
        with the largest regrowth score come back."""
        keep = self._flat(unit_masks(self.graph, masks))
        score = self._flat(unit_scores(self.graph, scores, masks))
        grow = self._flat(regrow_scores(self.graph, grads))
        group_of = self._group_of()
        for part in self._parts():
            step = schedule.step(t, part.size, int(keep[part].sum()))
            keep[part] = _step(
                keep[part], group_of[part], score[part], grow[part], step.n_prune, step.n_grow
            )
        return weight_masks(self.graph, self._split(keep))

    def _group_of(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.graph.groups)), [g.units for g in self.graph.groups])


def summary(graph: UnitGraph, masks: dict[int, Sequence[np.ndarray]]) -> dict:
    """``summary.json``'s record of a structured run: every group's units, how many each
    cluster's mask keeps, the fraction of units removed, and the layers whose outputs stay
    whole (with why)."""
    kept = {c: unit_masks(graph, m) for c, m in masks.items()}
    return {
        "structure": "filters",
        "units": {g.layer: g.units for g in graph.groups},
        "kept_units": {
            str(c): {g.layer: int(k.sum()) for g, k in zip(graph.groups, keep)}
            for c, keep in kept.items()
        },
        "unit_sparsity": {str(c): unit_sparsity(graph, m) for c, m in masks.items()},
        "whole_layers": dict(graph.kept),
    }
