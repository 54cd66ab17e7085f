"""Clustered FL on your own clients handed over as a TFF ``ClientData``: AS-CFL and IFCA on
Fashion-MNIST with your own CNN.

The situation AS-CFL is made for: clients whose data differ in a way nobody labelled. Here
each of the clients photographs its items with the camera turned by 0, 90, 180 or 270 degrees
(a hidden group per client) and holds a skewed share of the classes (Dirichlet(0.5)). The
script

1. reads Fashion-MNIST's official idx files itself (numpy, not fedprune's reader), builds the
   clients and wraps them in ``tff.simulation.datasets.TestClientData``, the way a TFF user
   holds federated data; the server's proxy set is 200 test images of all four rotations;
2. hands the ClientData to fedprune (``fedprune.images_from_client_data``) with each client's
   rotation as the ground truth for the ARI (no method sees it);
3. trains AS-CFL (which finds the number of clusters itself) and IFCA with K = 4, both with
   the same user CNN, and prints their final accuracy, clusters and ARI.

Run ``python examples/ascfl_ifca_client_data.py --help``; ``--quick`` is the test size.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
from pathlib import Path

import numpy as np

ANGLES = (0, 90, 180, 270)


def read_idx(path: Path) -> np.ndarray:
    """An idx file (``.gz`` or plain) as a numpy array."""
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    dims = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(folder: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    prefix = "train" if split == "train" else "t10k"
    x = read_idx(folder / f"{prefix}-images-idx3-ubyte.gz").astype(np.float32) / 255.0
    y = read_idx(folder / f"{prefix}-labels-idx1-ubyte.gz").astype(np.int64)
    return x[..., None], y


def make_clients(
    x: np.ndarray, y: np.ndarray, clients: int, per_client: int, seed: int
) -> tuple[dict, list[int]]:
    """{client id: {"x", "y"}} with a Dirichlet(0.5) class skew and one rotation per client
    (client i turned by ANGLES[i % 4]), and the rotation index of each client."""
    rng = np.random.default_rng(seed)
    by_class = [rng.permutation(np.flatnonzero(y == k)) for k in range(int(y.max()) + 1)]
    taken = [0] * len(by_class)
    data, groups = {}, []
    for i in range(clients):
        shares = rng.dirichlet([0.5] * len(by_class))
        counts = rng.multinomial(per_client, shares)
        rows = []
        for k, n in enumerate(counts):
            pool = by_class[k]
            rows += [pool[(taken[k] + j) % len(pool)] for j in range(n)]
            taken[k] += n
        rows = np.array(rows)
        group = i % len(ANGLES)
        data[str(i)] = {"x": np.rot90(x[rows], k=group, axes=(1, 2)).copy(), "y": y[rows]}
        groups.append(group)
    return data, groups


def my_cnn(input_shape: tuple[int, ...], num_classes: int):  # noqa: ANN201 (a Keras model)
    """A small CNN of one's own: two convolutions with pooling, global average pooling."""
    import tensorflow as tf

    layers = tf.keras.layers
    inputs = tf.keras.Input(shape=input_shape)
    h = layers.Conv2D(16, 3, activation="relu", name="conv1")(inputs)
    h = layers.MaxPool2D(2, name="pool1")(h)
    h = layers.Conv2D(32, 3, activation="relu", name="conv2")(h)
    h = layers.MaxPool2D(2, name="pool2")(h)
    h = layers.Flatten(name="flatten")(h)
    h = layers.Dense(64, activation="relu", name="hidden")(h)
    outputs = layers.Dense(num_classes, activation="softmax", name="probs")(h)
    return tf.keras.Model(inputs, outputs, name="my_cnn")


def default_folder() -> Path:
    here = Path(__file__).resolve().parent
    root = Path(os.environ.get("FEDPRUNE_DATA_DIR", here.parent.parent / "shared" / "data"))
    return root / "fashion_mnist"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=default_folder(), help="idx files' folder")
    parser.add_argument("--out", type=Path, default=Path("runs/example-ascfl-ifca"))
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--per-client", type=int, default=300, help="images per client")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="few clients and rounds (tests)")
    args = parser.parse_args(argv)
    if args.quick:
        args.clients, args.per_client, args.rounds = 8, 40, 2

    import tensorflow_federated as tff

    import fedprune as fp

    x, y = load(args.data, "train")
    x_test, y_test = load(args.data, "test")
    clients, groups = make_clients(x, y, args.clients, args.per_client, seed=0)
    client_data = tff.simulation.datasets.TestClientData(clients)
    rng = np.random.default_rng(1)
    pick = rng.choice(len(y_test), size=min(200, len(y_test)), replace=False)
    proxy_x = np.concatenate(
        [np.rot90(x_test[part], k=k, axes=(1, 2)) for k, part in enumerate(np.array_split(pick, 4))]
    )
    proxy = (proxy_x, y_test[np.concatenate(np.array_split(pick, 4))])
    data = fp.images_from_client_data(client_data, proxy=proxy, groups=groups)
    print(f"{len(data.clients)} clients, {len(data.y)} images, proxy {len(proxy[1])}")
    common = dict(model_fn=my_cnn, rounds=args.rounds, local_epochs=1, batch_size=32)
    outcome = {}
    for name, trainer in (
        ("ascfl", fp.ascfl(data, warmup_rounds=0 if args.quick else 5, **common)),
        ("ifca", fp.ifca(data, clusters=4, **common)),
    ):
        s = trainer.run(args.out / name, progress=not args.quick).summary
        outcome[name] = {k: s[k] for k in ("final_acc", "peak_acc", "clusters", "ari")}
    print(json.dumps(outcome, indent=2))
    return outcome


if __name__ == "__main__":
    main()
