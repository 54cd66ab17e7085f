"""CA-AFP on your own sensor data with your own Keras model, then to int8 for a device.

This is what a user with their own accelerometer recordings does:

1. read the raw stream (here WISDM v1.1's ``user,activity,timestamp,x,y,z;`` lines, read by
   this script, not by fedprune's WISDM reader) and cut it into 64-sample windows of the
   3 axes, half-overlapping, within each run of one user doing one activity;
2. hand the windows to fedprune as numpy arrays (``fedprune.from_arrays``): one client per
   user, the per-client time-ordered 80/20 split, each client standardized with its own
   training statistics;
3. train CA-AFP with a model fedprune's built-in CNN does not have (LayerNormalization,
   SeparableConv1D, GlobalAveragePooling1D) at 70 % sparsity of its prunable kernels, and
   fine-tune every client's personal model;
4. export every client's model to int8 TFLite with ``edge-export`` and print how many test
   windows the int8 file classifies differently from Keras.

Run ``python examples/caafp_own_model.py --help``; ``--quick`` is the test suite's small size.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
from pathlib import Path

import numpy as np

WINDOW = 64  # samples per window (3.2 s at WISDM's 20 Hz)
STEP = 32  # half-overlapping windows
ACTIVITIES = ("Downstairs", "Jogging", "Sitting", "Standing", "Upstairs", "Walking")


def read_raw(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(user, activity index, xyz) per well-formed row of a WISDM raw file (``.txt`` or
    ``.txt.gz``), in file order, and the number of malformed lines skipped."""
    opener = gzip.open if path.suffix == ".gz" else open
    users, labels, xyz, skipped = [], [], [], 0
    with opener(path, "rt", encoding="utf-8", errors="replace") as lines:
        for line in lines:
            for record in line.strip().split(";"):
                parts = record.strip().strip(",").split(",")
                if len(parts) != 6 or parts[1] not in ACTIVITIES:
                    skipped += bool(record.strip())
                    continue
                try:
                    values = [float(v) for v in parts[3:6]]
                    user = int(parts[0])
                except ValueError:
                    skipped += 1
                    continue
                if not np.all(np.isfinite(values)):
                    skipped += 1
                    continue
                users.append(user)
                labels.append(ACTIVITIES.index(parts[1]))
                xyz.append(values)
    return np.array(users), np.array(labels), np.array(xyz, np.float32), skipped


def windows(
    users: np.ndarray, labels: np.ndarray, xyz: np.ndarray, window: int = WINDOW, step: int = STEP
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Half-overlapping windows within each run of consecutive rows of one user and one
    activity (a window never spans two activities or two users): (x, y, user)."""
    change = np.flatnonzero((np.diff(users) != 0) | (np.diff(labels) != 0)) + 1
    starts = np.concatenate([[0], change])
    ends = np.concatenate([change, [len(users)]])
    xs, ys, us = [], [], []
    for a, b in zip(starts, ends):
        for s in range(a, b - window + 1, step):
            xs.append(xyz[s : s + window])
            ys.append(labels[a])
            us.append(users[a])
    return np.stack(xs), np.array(ys), np.array(us)


def my_model(input_shape: tuple[int, ...], num_classes: int):  # noqa: ANN201 (a Keras model)
    """A compact 1D CNN of the kind an edge engineer writes: a plain convolution stem (so the
    int8 export folds per-channel input scaling into it), layer normalization, a separable
    convolution, global average pooling and a softmax classifier."""
    import tensorflow as tf

    layers = tf.keras.layers
    inputs = tf.keras.Input(shape=input_shape)
    h = layers.Conv1D(24, 5, padding="same", activation="relu", name="stem")(inputs)
    h = layers.LayerNormalization(name="norm")(h)
    h = layers.MaxPool1D(2, name="pool")(h)
    h = layers.SeparableConv1D(32, 5, padding="same", activation="relu", name="sep")(h)
    h = layers.GlobalAveragePooling1D(name="gap")(h)
    h = layers.Dense(32, activation="relu", name="hidden")(h)
    outputs = layers.Dense(num_classes, activation="softmax", name="probs")(h)
    return tf.keras.Model(inputs, outputs, name="my_model")


def default_raw_file() -> Path:
    here = Path(__file__).resolve().parent
    root = Path(os.environ.get("FEDPRUNE_DATA_DIR", here.parent.parent / "shared" / "data"))
    for name in ("WISDM_ar_v1.1_raw.txt", "WISDM_ar_v1.1_raw_reconstructed.txt.gz"):
        if (root / "wisdm" / name).exists():
            return root / "wisdm" / name
    return root / "wisdm" / "WISDM_ar_v1.1_raw.txt"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--raw", type=Path, default=default_raw_file(), help="WISDM raw file")
    parser.add_argument("--out", type=Path, default=Path("runs/example-caafp-own-model"))
    parser.add_argument("--users", type=int, default=0, help="first N users only (0: all)")
    parser.add_argument("--phases", default="0,0,30", help="CA-AFP's T0,T1,T2 rounds")
    parser.add_argument("--quick", action="store_true", help="a few users and rounds (tests)")
    args = parser.parse_args(argv)

    import fedprune as fp
    from edge_export.cli import main as edge_export

    users, labels, xyz, skipped = read_raw(args.raw)
    x, y, user = windows(users, labels, xyz)
    keep = np.isin(user, np.unique(user)[: args.users or (3 if args.quick else None)])
    print(f"{len(y)} windows of {WINDOW}x3 from {args.raw.name} ({skipped} lines skipped)")
    data = fp.from_arrays(
        x[keep], y[keep], user[keep], class_names=ACTIVITIES, channel_names=("x", "y", "z")
    )
    phases = (0, 0, 2) if args.quick else tuple(int(t) for t in args.phases.split(","))
    trainer = fp.caafp(
        data,
        model_fn=my_model,
        phases=phases,
        clusters=2 if args.quick else 3,
        clients_per_round=3 if args.quick else 10,
        prune_frequency=1 if args.quick else 5,
        target_sparsity=0.7,
        standardize=True,
        ft_epochs=(1,) if args.quick else (3, 10),
    )
    result = trainer.run(args.out, progress=not args.quick)
    summary = result.summary
    longest = max(summary["finetune"], key=int)
    export_dir = args.out / "export"
    clients = str(min(result.assignments())) if args.quick else "all"
    status = edge_export(
        [str(args.out), "--out", str(export_dir), "--clients", clients, "--formats", "int8"]
    )
    if status != 0:
        sys.exit(status)
    report = json.loads((export_dir / "export_report.json").read_text())
    int8 = [e for e in report if e["format"] == "int8"]
    flipped = sum(e["flipped_windows"] for e in int8)
    tested = sum(e["test_windows"] for e in int8)
    outcome = {
        "personal_accuracy": summary["finetune"][longest]["avg_acc"],
        "sparsity_of_pruned_layers": summary["sparsity_pruned_layers"],
        "pruned_layers": summary["prune_layers"],
        "dense_layers": summary["dense_layers"],
        "int8_flipped": flipped,
        "int8_windows": tested,
    }
    print(json.dumps(outcome, indent=2))
    return outcome


if __name__ == "__main__":
    main()
