"""How closely post-training int8 follows Keras, per way of preparing the model (ablation).

For every client of each run and each (input scaling, logit range) setting of
``edge_export.prepare.prepare_for_format``, converts the client's personal model to int8 and
counts the windows whose class differs from Keras, on the test windows and on all windows
(test + training: ~6x more, so rare flips show up), and the RMS change of the top-2 logit
margin (log p1 - log p2 of Keras' two top classes) over near-tie windows (Keras margin < 3),
the error that decides whether a near tie flips.

    python experiments/int8_parity.py results/runs/caafp_0_0_50-uci_har-s0 [RUN ...] \
        --data-dir ../shared/data --out export/int8-parity.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
from pathlib import Path

import numpy as np
from tqdm import tqdm

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from edge_export.convert import to_tflite  # noqa: E402
from edge_export.prepare import INPUT_SCALINGS, LOGIT_RANGES, prepare_for_format  # noqa: E402
from edge_export.run_models import load_run  # noqa: E402
from edge_export.verify import run_tflite  # noqa: E402

NEAR_TIE = 3.0  # Keras top-2 log-probability margin below which a window counts as near tie
SETTINGS = list(itertools.product(INPUT_SCALINGS[::-1], LOGIT_RANGES[::-1]))  # baseline first


def top2_margin(probs: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """log p[first] - log p[second] per row (int8 probabilities floored at 1/512)."""
    p = np.maximum(probs.astype(np.float64), 1 / 512)
    rows = np.arange(len(p))
    return np.log(p[rows, first]) - np.log(p[rows, second])


def run_parity(run_path: str, data_dir: str | None) -> dict:
    run = load_run(run_path, data_dir)
    totals = {f"{s}/{r}": {"test_flips": 0, "all_flips": 0, "margin_err": []} for s, r in SETTINGS}
    for cid in tqdm(sorted(run.weights), desc=Path(run_path).name, unit="client"):
        model, client = run.keras(cid), run.client(cid)
        x = np.concatenate([client.x_test, client.x_train])
        keras = model.predict(x, verbose=0, batch_size=512)
        order = np.argsort(-keras, axis=1)
        margin = top2_margin(keras, order[:, 0], order[:, 1])
        near = margin < NEAR_TIE
        for scaling, logit_range in SETTINGS:
            prepared = prepare_for_format(model, "int8", client.x_train, scaling, logit_range)
            content = to_tflite(prepared.model, "int8", prepared.inputs(client.x_train))
            probs, _ = run_tflite(content, prepared.inputs(x))
            flipped = probs.argmax(-1) != order[:, 0]
            total = totals[f"{scaling}/{logit_range}"]
            total["test_flips"] += int(flipped[: len(client.x_test)].sum())
            total["all_flips"] += int(flipped.sum())
            err = top2_margin(probs, order[:, 0], order[:, 1]) - margin
            total["margin_err"] += err[near].tolist()
    for total in totals.values():
        err = np.asarray(total.pop("margin_err"))
        total.update(near_ties=len(err), margin_rms=float(np.sqrt(np.mean(err**2))))
        total["margin_max"] = float(np.abs(err).max())
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="finished CA-AFP (or baseline) run directories")
    parser.add_argument("--data-dir", default=None, help="as for fedprune")
    parser.add_argument("--out", default=None, help="also write the results as JSON here")
    args = parser.parse_args()
    results = {run: run_parity(run, args.data_dir) for run in args.runs}
    print("| run | input scaling / logit range | test flips | all flips | near ties "
          "| margin error RMS | max |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for run, totals in results.items():
        for setting, t in totals.items():
            print(
                f"| {Path(run).name} | {setting} | {t['test_flips']} | {t['all_flips']} "
                f"| {t['near_ties']} | {t['margin_rms']:.3f} | {t['margin_max']:.2f} |"
            )
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
