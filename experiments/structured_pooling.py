"""Measurement: which layers one global ranking of whole units empties, when a unit scores the
mean or the sum of its weights' Eq. 9 magnitudes (``--structure filters``,
:mod:`fedprune.sparsity.structured`).

The paper's model is trained for a few epochs on UCI-HAR's pooled training windows (the
time-ordered split of seed 0, Adam 1e-3, batch 32), then each unit (a conv filter, a hidden
dense unit) gets the mean and the sum of |w| / max |u| over its kernel column, and the
lowest-scoring 70 % of all units are removed as ``--budget global`` would (never a layer's
last unit). Magnitude alone: the coherence and consistency terms need federated statistics,
and the magnitude term is what differs between layers (Glorot scales a layer's weights by
its fan-in).

    FEDPRUNE_DATA_DIR=../shared/data python experiments/structured_pooling.py --epochs 3
"""

from __future__ import annotations

import argparse
import os

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--fraction", type=float, default=0.7)
    args = parser.parse_args()

    import tensorflow as tf

    from fedprune.data.registry import load_federated
    from fedprune.models.cnn1d import build_har_cnn
    from fedprune.sparsity import structured as S
    from fedprune.sparsity.layers import prunable_mask_flags, select
    from fedprune.sparsity.scores import magnitude

    data = load_federated("uci_har", 0, os.environ.get("FEDPRUNE_DATA_DIR"), verbose=False)
    x = np.concatenate([c.x_train for c in data.clients])
    y = np.concatenate([c.y_train for c in data.clients])
    tf.keras.utils.set_random_seed(0)
    model = build_har_cnn(data.input_shape, data.num_classes, seed=0)
    model.compile(tf.keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy")
    model.fit(x, y, epochs=args.epochs, batch_size=32, verbose=0)
    flags = prunable_mask_flags(model)
    graph = S.unit_graph(model, flags)
    kernels = select(model.get_weights(), flags)
    mean = S.unit_scores(graph, magnitude(kernels), [np.ones_like(k) for k in kernels])
    fan_in = [int(np.prod(graph.shapes[g.producer][:-1])) for g in graph.groups]
    for name, pooled in (("mean", mean), ("sum", [m * f for m, f in zip(mean, fan_in)])):
        masks = S.StructuredMasks(graph).prune_to(
            [np.ones(s, np.float32) for s in graph.shapes],
            _per_weight(graph, pooled),
            args.fraction,
        )
        kept = S.unit_masks(graph, masks)
        print(
            f"{name}: kept "
            + ", ".join(f"{g.layer} {int(k.sum())}/{g.units}" for g, k in zip(graph.groups, kept))
            + "; unit scores "
            + ", ".join(
                f"{g.layer} {p.min():.3g}..{p.max():.3g}" for g, p in zip(graph.groups, pooled)
            )
        )


def _per_weight(graph: object, pooled: list[np.ndarray]) -> list[np.ndarray]:
    """Per-weight scores whose column means are ``pooled`` (each unit's score in its column;
    kernels without a group score 0, they are not ranked)."""
    scores = [np.zeros(s) for s in graph.shapes]
    for g, p in zip(graph.groups, pooled):
        scores[g.producer] = np.broadcast_to(p, graph.shapes[g.producer]).copy()
    return scores


if __name__ == "__main__":
    main()
