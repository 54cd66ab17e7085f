"""Export FedCRef community autoencoders: TFLite float32/int8 and TFLite Micro C arrays.

A FedCRef run directory holds ``community_models.npz`` (the final community autoencoders); its
deploy manifest (kind ``community``, :mod:`fedprune.runs.deploy`) names the model and records
the recipe that rebuilds its clients' samples (:func:`fedprune.data.registry.load_recorded`:
every client's samples, concatenated in client order). Each community model is rebuilt in Keras,
converted (:func:`edge_export.convert.to_tflite`), and checked against Keras on the samples it
serves, i.e. those for which it has the lowest reconstruction error among the community models
(a label-free assignment, what a device would do with all the models). Reported per file:
mean reconstruction MSE in Keras and TFLite, max |per-sample MSE difference|, the fraction of
samples whose lowest-error community is unchanged when every model runs in this format
(assignment agreement), latency per sample (XNNPACK), size and gzip size; ``--micro`` adds the
int8 model as a C array with its op list and measured arena.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf
from tqdm import tqdm

from edge_export.convert import to_tflite
from edge_export.formats import AUTOENCODER_FORMATS, check_formats
from edge_export.micro import export_micro, quantize_input
from edge_export.verify import run_tflite, runtime_loads
from fedprune.data.registry import load_recorded
from fedprune.data.tables import ClientTable
from fedprune.errors import ConfigError, DataError
from fedprune.models.autoencoder import reconstruction_errors
from fedprune.models.spec import AutoencoderSpec
from fedprune.models.user import is_user_model, resolve
from fedprune.runs import names
from fedprune.runs.files import RETRAIN, write_bytes, write_json, write_text
from fedprune.runs.finished import FinishedRun, open_finished

__all__ = [
    "AUTOENCODER_FORMATS",
    "export_fedcref_run",
    "is_community_run",
    "load_community_models",
    "report_markdown",
]

CALIBRATION = 500  # samples per community for int8 calibration
VERIFY = 300  # samples per community for the comparison


def is_community_run(run_dir: str | os.PathLike) -> bool:
    """Whether ``run_dir`` deploys community autoencoders (its manifest's kind); a missing or
    damaged run is a ``DataError``."""
    return open_finished(run_dir).deploy.kind == "community"


def load_community_models(run_dir: str | os.PathLike) -> list[list[np.ndarray]]:
    """The final community autoencoders' weights (Keras order) of a finished FedCRef run."""
    run = open_finished(run_dir)
    if run.deploy.kind != "community":
        raise ConfigError(f"{run_dir} is not a FedCRef run (method {run.method!r})")
    return run.community_models()


def _run_samples(run: FinishedRun, data_dir: str | os.PathLike | None) -> np.ndarray:
    """Every client's samples, concatenated in client order (from the run's data recipe)."""
    recipe = run.deploy.data
    try:
        clients = load_recorded(recipe, data_dir)
    except KeyError as err:
        raise DataError(
            f"{run.path}: its data recipe has no {err.args[0]!r}; re-run training with this "
            "version"
        ) from None
    if isinstance(clients, ClientTable):  # your own vectors, in client order
        return np.concatenate(clients.client_x()).astype(np.float32)
    if not isinstance(clients, list):
        raise DataError(f"{run.path}: its data recipe does not give image clients; {RETRAIN}")
    return np.concatenate([c.x for c in clients])


def _keras(
    run_dir: Path, model_name: str, g: int, weights: list[np.ndarray], dim: int
) -> tf.keras.Model:
    """Community ``g``'s autoencoder in Keras (the table's, or yours rebuilt from the run's
    ``model.json``); weights of another shape are a damaged file."""
    model = AutoencoderSpec(dim, seed=0, model=resolve(model_name, None, run_dir)).keras()
    try:
        model.set_weights(weights)
    except ValueError as err:
        raise DataError(
            f"{run_dir / names.COMMUNITY_MODELS}: community {g} does not fit the autoencoder of "
            f"{dim} inputs ({' '.join(str(err).split())}); {RETRAIN}"
        ) from None
    return model


def _errors(model: tf.keras.Model, weights: list[np.ndarray], x: np.ndarray, yours: bool):  # noqa: ANN202
    """Per-sample reconstruction MSE: the paper's autoencoder as training scored it (numpy),
    your own autoencoder by Keras."""
    if yours:
        return np.mean((x - model.predict(x, batch_size=512, verbose=0)) ** 2, axis=1)
    return reconstruction_errors(weights, x)


def export_fedcref_run(
    run_dir: str | os.PathLike,
    formats: Sequence[str],
    out: str | os.PathLike,
    data_dir: str | os.PathLike | None = None,
    micro: bool = False,
    progress: bool = True,
    models: list[list[np.ndarray]] | None = None,
) -> list[dict]:
    """Convert and verify every community autoencoder; writes files and export_report.json.

    ``models`` are the community models if already read (:func:`load_community_models`).
    """
    check_formats(formats, autoencoders=True)
    run_dir, out = Path(run_dir), Path(out)
    run = open_finished(run_dir)
    manifest = run.deploy
    models = models if models is not None else load_community_models(run_dir)
    x = _run_samples(run, data_dir)
    if tuple(manifest.input_shape) != x.shape[1:]:
        raise DataError(
            f"{run_dir}: the run's autoencoders take {manifest.input_shape} inputs, the data "
            f"{x.shape[1:]}; pass the --data-dir the run was trained on"
        )
    keras_models = [
        _keras(run_dir, manifest.model, g, weights, x.shape[1]) for g, weights in enumerate(models)
    ]
    yours = is_user_model(manifest.model)
    errors = np.stack([_errors(k, w, x, yours) for k, w in zip(keras_models, models)])
    owner = errors.argmin(axis=0)
    rng = np.random.default_rng(0)
    entries: list[dict] = []
    tflite_errors: dict[str, list[np.ndarray]] = {f: [] for f in formats}
    check = np.sort(rng.choice(len(x), size=min(len(x), 2000), replace=False))
    # the bar is closed (its line ended) before an error or interrupt is reported
    with tqdm(total=len(models) * len(formats), desc="export", disable=not progress) as bar:
        for g, weights in enumerate(models):
            served = np.flatnonzero(owner == g)
            if len(served) == 0:
                served = np.arange(len(x))
            calib = x[rng.choice(served, size=min(len(served), CALIBRATION), replace=False)]
            sample = x[rng.choice(served, size=min(len(served), VERIFY), replace=False)]
            model = keras_models[g]
            keras_err = _errors(model, weights, sample, yours)
            folder = out / f"community{g}"
            folder.mkdir(parents=True, exist_ok=True)
            for fmt in formats:
                content = to_tflite(model, fmt, calib if fmt == "int8" else None)
                path = folder / f"{fmt}.tflite"
                write_bytes(path, content)
                recon, latency = run_tflite(content, sample)
                lite_err = np.mean((recon - sample) ** 2, axis=1)
                recon_check, _ = run_tflite(content, x[check])
                tflite_errors[fmt].append(np.mean((recon_check - x[check]) ** 2, axis=1))
                entry = {
                    "community": g,
                    "format": fmt,
                    "path": str(path.relative_to(out)),
                    "bytes": len(content),
                    "gzip_bytes": len(gzip.compress(content)),
                    "served_samples": int(len(served)),
                    "keras_mse": float(keras_err.mean()),
                    "tflite_mse": float(lite_err.mean()),
                    "max_abs_mse_diff": float(np.max(np.abs(lite_err - keras_err))),
                    "latency_ms": latency,
                    "runtime_loads": runtime_loads(content),
                }
                if micro and fmt == "int8":
                    first = quantize_input(content, sample[:1])
                    arena = export_micro(
                        content, folder / "int8_micro", f"community{g}_int8", first
                    )
                    entry.update(
                        micro_arena_bytes=arena.arena_bytes,
                        micro_arena_measured=arena.arena_measured,
                    )
                write_json(
                    folder / f"{fmt}.json",
                    {
                        "source_run": str(run_dir),
                        "method": run.method,
                        "community": g,
                        "format": fmt,
                        "input": {"shape": [1, int(x.shape[1])], "dtype": "see format"},
                        "normalization": "pixels / 255 (float in [0, 1]) before quantization",
                        "output": "reconstruction; a sample belongs to the community whose "
                        "model reconstructs it with the lowest mean squared error",
                    },
                    sort_keys=False,
                )
                entries.append(entry)
                bar.update(1)
    keras_owner = errors[:, check].argmin(axis=0)
    for fmt in formats:
        agreement = float(np.mean(np.stack(tflite_errors[fmt]).argmin(axis=0) == keras_owner))
        for e in entries:
            if e["format"] == fmt:
                e["assignment_agreement"] = agreement
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "export_report.json", entries, sort_keys=False)
    write_text(out / "export_report.md", report_markdown(entries))
    return entries


def report_markdown(entries: Sequence[dict]) -> str:
    """One table row per (community, format)."""
    lines = [
        "| community | format | KB | gzip KB | Keras MSE | TFLite MSE | max dMSE | "
        "assignment agreement | ms/sample | micro arena KB |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for e in entries:
        arena = f"{e['micro_arena_bytes'] / 1024:.1f}" if "micro_arena_bytes" in e else ""
        lines.append(
            f"| {e['community']} | {e['format']} | {e['bytes'] / 1024:.1f} | "
            f"{e['gzip_bytes'] / 1024:.1f} | {e['keras_mse']:.5f} | {e['tflite_mse']:.5f} | "
            f"{e['max_abs_mse_diff']:.5f} | {e['assignment_agreement']:.4f} | "
            f"{e['latency_ms']:.3f} | {arena} |"
        )
    return "\n".join(lines) + "\n"
