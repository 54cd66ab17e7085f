"""Choosing, per client, how an int8 file is prepared: by measured agreement on held-out
training windows.

Post-training int8 adds rounding noise to every tensor; a test window flips class when the
noise on its top-2 logit margin exceeds the margin. A confident model has few windows near
a tie and flips almost none; a less confident one (fewer rounds, harder data, heavy pruning)
has many, and which preparation keeps its margins best differs from client to client
(docs/edge-export.md, "int8 parity"). So each client's file is prepared by the candidate
that measured best on its own data:

1. A seeded fifth of the client's training windows (at least one) is held out; the
   candidates are calibrated on the rest and converted.
2. Each converted candidate runs on the held-out windows. Candidates are ranked by the
   windows whose class differs from Keras (fewer is better), then by the RMS error of the
   top-2 log-probability margin over the held-out windows whose Keras margin is below
   :data:`NEAR_TIE` (the error that decides whether a near tie flips; every such window
   counts, not only the rare ones that flipped), then by candidate order.
3. The chosen candidate is prepared again on all training windows (more windows, safer
   ranges) and that is the exported file. The ``.json`` beside it records the choice and
   every candidate's two measurements.

The candidates: ``plain`` (the model as it is, then per-channel input scaling and the
decision logit range of :mod:`edge_export.prepare`), ``equalized`` and ``half-equalized``
(the same after :func:`edge_export.equalize.equalize` with power 1 and 0.5; only for models
whose output layer follows a ReLU Dense layer). All are exact in float.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from edge_export.convert import to_tflite
from edge_export.equalize import equalizable_pair, equalize
from edge_export.prepare import Prepared, prepare_for_format
from edge_export.verify import run_tflite
from fedprune.errors import ConfigError

CANDIDATES = {"plain": None, "equalized": 1.0, "half-equalized": 0.5}  # name -> power
CALIBRATIONS = ("auto", *CANDIDATES)
HELD_OUT = 0.2  # fraction of the training windows held out to measure the candidates
NEAR_TIE = 3.0  # Keras top-2 log-probability margin below which a window is "near a tie"
PROB_FLOOR = 1.0 / 256  # an int8 probability of 0 is read as this (one output step)


@dataclasses.dataclass(frozen=True)
class Measured:
    """One candidate on the held-out windows."""

    flipped: int
    margin_rms: float

    def key(self) -> tuple[int, float]:
        return self.flipped, self.margin_rms


def held_out_split(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(calibration, held-out) indices of ``n`` training windows: a seeded fifth (at least
    one, never all) held out."""
    if n < 2:
        raise ConfigError(f"choosing an int8 calibration needs >= 2 training windows; got {n}")
    order = np.random.default_rng([seed, 7]).permutation(n)
    k = min(max(1, int(round(HELD_OUT * n))), n - 1)
    return np.sort(order[k:]), np.sort(order[:k])


def margin_rms(keras_probs: np.ndarray, int8_probs: np.ndarray) -> float:
    """RMS change of the top-2 log-probability margin (Keras' two top classes) over the
    windows whose Keras margin is below :data:`NEAR_TIE`; 0 when there are none."""
    order = np.argsort(keras_probs, axis=1)
    rows = np.arange(len(keras_probs))
    a, b = order[:, -1], order[:, -2]

    def margin(p: np.ndarray) -> np.ndarray:
        p = np.maximum(p, PROB_FLOOR)
        return np.log(p[rows, a]) - np.log(p[rows, b])

    reference = margin(keras_probs)
    near = reference < NEAR_TIE
    if not near.any():
        return 0.0
    return float(np.sqrt(np.mean((margin(int8_probs)[near] - reference[near]) ** 2)))


def available(model: tf.keras.Model) -> list[str]:
    """The candidates that apply to ``model``."""
    pairs = equalizable_pair(model) is not None
    return [name for name, power in CANDIDATES.items() if power is None or pairs]


def prepare_candidate(
    model: tf.keras.Model,
    name: str,
    fmt: str,
    x: np.ndarray,
    input_scaling: str = "per-channel",
    logit_range: str = "decision",
) -> Prepared:
    """``model`` prepared for ``fmt`` by candidate ``name`` from the windows ``x``."""
    power = CANDIDATES[name]
    source = model if power is None else equalize(model, x, power)
    return prepare_for_format(source, fmt, x, input_scaling, logit_range)


def choose(
    model: tf.keras.Model,
    fmt: str,
    x_train: np.ndarray,
    seed: int,
    input_scaling: str = "per-channel",
    logit_range: str = "decision",
) -> tuple[str, dict[str, Measured]]:
    """The best candidate for ``model`` in ``fmt`` on a held-out fifth of ``x_train``, and
    every candidate's measurements (module docstring)."""
    names = available(model)
    if len(names) == 1:
        return names[0], {}
    fit, check = held_out_split(len(x_train), seed)
    keras_probs = model.predict(x_train[check], verbose=0, batch_size=512)
    measured = {}
    for name in names:
        prepared = prepare_candidate(model, name, fmt, x_train[fit], input_scaling, logit_range)
        content = to_tflite(prepared.model, fmt, prepared.inputs(x_train[fit]))
        probs, _ = run_tflite(content, prepared.inputs(x_train[check]))
        flipped = int(np.sum(probs.argmax(-1) != keras_probs.argmax(-1)))
        measured[name] = Measured(flipped, margin_rms(keras_probs, probs))
    best = min(names, key=lambda n: (*measured[n].key(), names.index(n)))
    return best, measured


def calibration_record(chosen: str, measured: dict[str, Measured], held_out: int) -> dict:
    """What the file's ``.json`` says about how it was prepared."""
    return {
        "chosen": chosen,
        "held_out_windows": held_out,
        "candidates": {
            name: {"flipped": m.flipped, "margin_rms": round(m.margin_rms, 6)}
            for name, m in measured.items()
        },
    }
