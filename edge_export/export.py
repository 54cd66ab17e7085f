"""Export each selected client's model in each format, verify it, and write the report.

For every file ``<out>/client<ID>/<format>.tflite`` a ``.json`` beside it records what the device
needs: input shape/dtype/quantization, activity labels, the per-channel map the device applies
to raw sensor values (the run's ``--standardize`` constants and, for post-training integer
files, the input scaling of :mod:`edge_export.prepare`, as one offset/scale), and the source run.
``<out>/export_report.json`` and ``export_report.md`` list size, gzip size and the comparison
with Keras on the client's test windows.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf
from tqdm import tqdm

from edge_export.convert import sparse_tensors, to_tflite
from edge_export.formats import MICRO_FORMATS
from edge_export.micro import export_micro, quantize_input
from edge_export.prepare import Prepared, device_normalization, prepare_for_format
from edge_export.qat import quantization_aware_finetune
from edge_export.run_models import RunModels
from edge_export.verify import runtime_loads, verify
from fedprune.data.partition import ClientData
from fedprune.quiet import native_output

__all__ = ["MICRO_FORMATS", "export_run", "report_markdown", "summary_markdown"]


def _metadata(run: RunModels, client_id: int, fmt: str, content: bytes, prepared: Prepared) -> dict:
    with native_output():
        interpreter = tf.lite.Interpreter(model_content=content)
    inp = interpreter.get_input_details()[0]
    out = interpreter.get_output_details()[0]
    client = run.client(client_id)
    return {
        "source_run": str(run.path),
        "method": run.config.get("method"),
        "dataset": run.data.name,
        "client": client_id,
        "format": fmt,
        "input": {
            "shape": [int(s) for s in inp["shape"]],
            "dtype": np.dtype(inp["dtype"]).name,
            "quantization": {
                "scale": float(inp["quantization"][0]),
                "zero_point": int(inp["quantization"][1]),
            },
        },
        "output": {
            "dtype": np.dtype(out["dtype"]).name,
            "quantization": {
                "scale": float(out["quantization"][0]),
                "zero_point": int(out["quantization"][1]),
            },
        },
        "labels": list(run.labels),
        "normalization": device_normalization(client, prepared.scaling),
        "input_scaling": "per-channel" if prepared.scaling is not None else "per-tensor",
        "logit_range": prepared.logit_range,
        "sparsity": run.sparsity(client_id),
        "models": run.source,
        "sparse_tensors": sparse_tensors(content),
    }


@dataclasses.dataclass(frozen=True)
class _Reference:
    """A Keras model to convert, with its class probabilities on the client's test windows."""

    model: tf.keras.Model
    probs: np.ndarray
    acc: float


def _reference(model: tf.keras.Model, client: ClientData) -> _Reference:
    probs = model.predict(client.x_test, verbose=0)
    return _Reference(model, probs, float(np.mean(probs.argmax(-1) == client.y_test)))


def export_run(
    run: RunModels,
    clients: Sequence[int],
    formats: Sequence[str],
    out: str | Path,
    progress: bool = True,
    micro: bool = False,
    qat_epochs: int = 2,
    qat_learning_rate: float = 1e-4,
    input_scaling: str = "per-channel",
    logit_range: str = "decision",
) -> list[dict]:
    """Export, verify and report; returns the report entries.

    ``input_scaling`` and ``logit_range`` choose how post-training integer formats are
    prepared (:func:`prepare_for_format`; "per-tensor" / "full" convert the model as it is).

    With ``micro`` each client's int8, int8-qat and int16x8 models are also written as
    TFLite Micro C array pairs (``client<ID>/micro_int8.{h,cc}``, ...) with their arena size.
    The ``-qat`` formats convert a copy of the client's model after ``qat_epochs`` of
    quantization-aware fine-tuning on its training windows (:mod:`edge_export.qat`); every
    format is compared with the client's trained Keras model.
    """
    out = Path(out)
    entries = []
    # the bar is closed (its line ended) before an error or interrupt is reported; nothing
    # is written before the first client's model is built (a bad checkpoint fails first)
    with tqdm(
        total=len(clients) * len(formats), desc="export", unit="file", disable=not progress
    ) as bar:
        for client_id in clients:
            client = run.client(client_id)
            trained = _reference(run.keras(client_id), client)
            qat = None
            for fmt in formats:
                if "-qat" in fmt and qat is None:
                    seed = int(run.config.get("seed", 0)) * 1000 + client_id
                    tuned = quantization_aware_finetune(
                        trained.model, client.x_train, client.y_train,
                        epochs=qat_epochs, learning_rate=qat_learning_rate, seed=seed,
                    )  # fmt: skip
                    qat = _reference(tuned, client)
                if "-qat" in fmt:
                    aware = {"epochs": qat_epochs, "learning_rate": qat_learning_rate}
                    prepared = Prepared(qat.model)
                    entry = _export_one(run, client_id, fmt, prepared, qat, trained, out, aware)
                else:
                    prepared = prepare_for_format(
                        trained.model, fmt, client.x_train, input_scaling, logit_range
                    )
                    entry = _export_one(run, client_id, fmt, prepared, trained, trained, out)
                if micro and fmt in MICRO_FORMATS:
                    entry.update(_micro(out, entry, client, prepared))
                entries.append(entry)
                bar.update()
    out.mkdir(parents=True, exist_ok=True)
    (out / "export_report.json").write_text(json.dumps(entries, indent=2) + "\n")
    (out / "export_report.md").write_text(report_markdown(entries))
    return entries


def _export_one(
    run: RunModels,
    client_id: int,
    fmt: str,
    prepared: Prepared,
    source: _Reference,
    trained: _Reference,
    out: Path,
    quantization_aware: dict | None = None,
) -> dict:
    """Convert ``prepared`` (made from ``source``), write the file and its metadata, verify
    it against ``trained``."""
    client = run.client(client_id)
    content = to_tflite(prepared.model, fmt, prepared.inputs(client.x_train))
    path = out / f"client{client_id}" / f"{fmt}.tflite"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    meta = _metadata(run, client_id, fmt, content, prepared)
    if quantization_aware is not None:
        meta["quantization_aware"] = quantization_aware
    path.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n")
    check = verify(content, trained.probs, prepared.inputs(client.x_test), client.y_test)
    entry = {
        "client": client_id,
        "format": fmt,
        "path": str(path.relative_to(out)),
        "bytes": len(content),
        "gzip_bytes": len(gzip.compress(content, 9)),
        "sparse_encoded": bool(meta["sparse_tensors"]),
        "sparsity": meta["sparsity"],
        "keras_acc": trained.acc,
        "tflite_acc": check.tflite_acc,
        "acc_delta": check.tflite_acc - trained.acc,
        "agreement": check.agreement,
        "test_windows": len(client.y_test),
        "flipped_windows": int(round((1.0 - check.agreement) * len(client.y_test))),
        "max_prob_diff": check.max_prob_diff,
        "latency_ms": check.latency_ms,
        "latency_ref_ms": check.latency_ref_ms,
        "tflite_runtime_loads": runtime_loads(content),
        "input_scaling": meta["input_scaling"],
        "logit_range": meta["logit_range"],
    }
    if source is not trained:  # a fine-tuned copy: also compare with the model converted
        entry["qat_keras_acc"] = source.acc
        entry["qat_agreement"] = float(np.mean(check.predictions == source.probs.argmax(-1)))
    return entry


def _micro(out: Path, entry: dict, client: ClientData, prepared: Prepared) -> dict:
    """The TFLite Micro C array pair of an exported file, and its report fields."""
    path = out / entry["path"]
    content = path.read_bytes()
    stem = path.parent / f"micro_{entry['format'].replace('-', '_')}"
    sample = quantize_input(content, prepared.inputs(client.x_test[:1]))
    arena = export_micro(
        content, stem, f"client{entry['client']}_model", sample,
        device_normalization(client, prepared.scaling),
    )  # fmt: skip
    return {
        "micro_path": str(stem.with_suffix(".cc").relative_to(out)),
        "micro_ops": arena.ops,
        "micro_arena_bytes": arena.arena_bytes,
        "micro_arena_measured": arena.arena_measured,
    }


def report_markdown(entries: Sequence[dict]) -> str:
    """The report as a Markdown table."""
    head = (
        "| client | format | KB | gzip KB | sparse stored | Keras acc | TFLite acc | Δ acc "
        "| agreement | flipped | max Δp | ms XNNPACK | ms reference | micro arena |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = "".join(
        f"| {e['client']} | {e['format']} | {e['bytes'] / 1024:.1f} | {e['gzip_bytes'] / 1024:.1f} "
        f"| {'yes' if e['sparse_encoded'] else 'no'} "
        f"| {e['keras_acc']:.4f} | {e['tflite_acc']:.4f} | {e['acc_delta']:+.4f} "
        f"| {e['agreement']:.4f} | {_flipped(e)} | {e['max_prob_diff']:.4f} "
        f"| {e['latency_ms']:.3f} "
        f"| {e['latency_ref_ms']:.3f} | {_arena(e)} |\n"
        for e in entries
    )
    return head + rows + summary_markdown(entries)


def summary_markdown(entries: Sequence[dict]) -> str:
    """One line per format over all clients: sizes, accuracy change, flips, latency, arena."""
    lines = [
        "\n| format | files | KB min / median / max | gzip KB median | Δ acc min / max (pp) "
        "| flipped (clients > 1 pp) | ms XNNPACK | ms reference | micro arena max |\n",
        "|---|---|---|---|---|---|---|---|---|\n",
    ]
    for fmt in dict.fromkeys(e["format"] for e in entries):
        group = [e for e in entries if e["format"] == fmt]
        kb = [e["bytes"] / 1024 for e in group]
        delta = [100 * e["acc_delta"] for e in group]
        flipped = sum(e.get("flipped_windows", 0) for e in group)
        windows = sum(e.get("test_windows", 0) for e in group)
        flips = f"{flipped}/{windows}" if windows else "?"
        over = sum(abs(d) > 1.0 for d in delta)
        arenas = [e["micro_arena_bytes"] for e in group if "micro_arena_bytes" in e]
        arena = f"{max(arenas) / 1024:.1f} KB" if arenas else ""
        lines.append(
            f"| {fmt} | {len(group)} | {min(kb):.1f} / {np.median(kb):.1f} / {max(kb):.1f} "
            f"| {np.median([e['gzip_bytes'] for e in group]) / 1024:.1f} "
            f"| {min(delta):+.1f} / {max(delta):+.1f} | {flips} ({over}) "
            f"| {np.median([e['latency_ms'] for e in group]):.3f} "
            f"| {np.median([e['latency_ref_ms'] for e in group]):.3f} | {arena} |\n"
        )
    return "".join(lines)


def _flipped(entry: dict) -> str:
    """Test windows whose predicted class differs from Keras, of all the client's windows."""
    if "flipped_windows" not in entry:
        return ""
    return f"{entry['flipped_windows']}/{entry['test_windows']}"


def _arena(entry: dict) -> str:
    if "micro_arena_bytes" not in entry:
        return ""
    kb = entry["micro_arena_bytes"] / 1024
    return f"{kb:.1f} KB" + ("" if entry["micro_arena_measured"] else " (upper bound)")
