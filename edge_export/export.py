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

from edge_export.calibration import (
    CALIBRATIONS,
    available,
    calibration_record,
    choose,
    held_out_split,
    prepare_candidate,
)
from edge_export.convert import FLOAT_HEAD, sparse_tensors, to_tflite
from edge_export.formats import MICRO_FORMATS
from edge_export.micro import export_micro_project
from edge_export.micro.cortex_m import MicroTarget, cortex_m_markdown
from edge_export.prepare import (
    Prepared,
    device_normalization,
    prepare_for_format,
)
from edge_export.qat import quantization_aware_finetune
from edge_export.requantization import XNNPACK_LIMIT, largest
from edge_export.run_models import RunModels
from edge_export.verify import (
    LATENCY_INVOKES,
    RUNTIMES,
    cpu_name,
    device_run,
    verify,
)
from edge_export.zero_layers import first_zero_layer
from fedprune.data.partition import ClientData
from fedprune.errors import ConfigError
from fedprune.quiet import native_output
from fedprune.runs.files import atomic_file, write_bytes, write_json, write_text

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
        "models_file": run.source_file,
        "models_sha256": run.source_sha256,
        "sparse_tensors": sparse_tensors(content),
        "compaction": run.compaction(client_id),
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
    calibration: str = "auto",
    micro_target: MicroTarget | None = None,
) -> list[dict]:
    """Export, verify and report; returns the report entries.

    ``input_scaling`` and ``logit_range`` choose how post-training integer formats are
    prepared (:func:`prepare_for_format`; "per-tensor" / "full" convert the model as it is).
    ``calibration`` picks the int8 preparation (:mod:`edge_export.calibration`): ``auto``
    measures the candidates on held-out training windows per client, a candidate's name
    forces it. ``<out>/predictions.csv`` holds every test window's class per format.

    With ``micro`` each client's int8, int8-float-head, int8-qat and int16x8 models are also
    written as TFLite Micro projects (``client<ID>/micro_int8/``, ...: the model as C++ with
    its arena size and op registration, test vectors, a host build;
    :mod:`edge_export.micro.project`).
    The ``-qat`` formats convert a copy of the client's model after ``qat_epochs`` of
    quantization-aware fine-tuning on its training windows (:mod:`edge_export.qat`); every
    format is compared with the client's trained Keras model.
    """
    if calibration not in CALIBRATIONS:
        raise ConfigError(f"--calibration must be one of {', '.join(CALIBRATIONS)}")
    out = Path(out)
    entries = []
    predictions: list[dict] = []
    # the bar is closed (its line ended) before an error or interrupt is reported; nothing
    # is written before the first client's model is built (a bad checkpoint fails first)
    with tqdm(
        total=len(clients) * len(formats), desc="export", unit="file", disable=not progress
    ) as bar:
        for client_id in clients:
            client = run.client(client_id)
            trained = _reference(run.deployable(client_id), client)
            qat = None
            chosen: dict[str, dict] = {}  # the preparation per calibrated family (CALIBRATED)
            rows = _prediction_rows(client, trained)
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
                elif fmt in CALIBRATED:
                    family = CALIBRATED[fmt]
                    if family not in chosen:
                        seed = int(run.config.get("seed", 0)) * 1000 + client_id
                        chosen[family] = _calibration(
                            trained.model, client, seed, calibration, input_scaling,
                            logit_range, family,
                        )  # fmt: skip
                    prepared = prepare_candidate(
                        trained.model, chosen[family]["chosen"], fmt, client.x_train,
                        input_scaling, logit_range,
                    )  # fmt: skip
                    entry = _export_one(
                        run, client_id, fmt, prepared, trained, trained, out,
                        calibration=chosen[family],
                    )  # fmt: skip
                else:
                    prepared = prepare_for_format(
                        trained.model, fmt, client.x_train, input_scaling, logit_range
                    )
                    entry = _export_one(run, client_id, fmt, prepared, trained, trained, out)
                predicted = entry.pop("predictions")
                for row, value in zip(rows, predicted):
                    row[fmt] = int(value)
                if micro and fmt in MICRO_FORMATS:
                    entry.update(_micro(out, entry, client, prepared, micro_target))
                entries.append(entry)
                bar.update()
            predictions.extend(rows)
    out.mkdir(parents=True, exist_ok=True)
    _write_predictions(out / PREDICTIONS, predictions, formats)
    write_json(out / "export_report.json", entries, sort_keys=False)
    write_text(out / "export_report.md", report_markdown(entries))
    return entries


PREDICTIONS = "predictions.csv"
# the formats whose preparation is chosen per client (edge_export.calibration), by the format
# the candidates are measured in: int8-sparse computes what int8 does, so they share a choice
CALIBRATED = {"int8": "int8", "int8-sparse": "int8", FLOAT_HEAD: FLOAT_HEAD}


def _calibration(
    model: tf.keras.Model,
    client: ClientData,
    seed: int,
    calibration: str,
    input_scaling: str,
    logit_range: str,
    fmt: str = "int8",
) -> dict:
    """The client's preparation for ``fmt``: measured (``auto``) or the one named."""
    if calibration != "auto":
        if calibration not in available(model):
            raise ConfigError(
                f"--calibration {calibration} needs a ReLU Dense layer before the output "
                f"layer; choose from {', '.join(['auto', *available(model)])}"
            )
        return calibration_record(calibration, {}, 0)
    best, measured = choose(model, fmt, client.x_train, seed, input_scaling, logit_range)
    held_out = len(held_out_split(len(client.x_train), seed)[1]) if measured else 0
    return calibration_record(best, measured, held_out)


def _prediction_rows(client: ClientData, trained: _Reference) -> list[dict]:
    """One row per test window of ``client``: its label and Keras' class."""
    keras = trained.probs.argmax(-1)
    return [
        {"client": client.client_id, "window": i, "label": int(y), "keras": int(k)}
        for i, (y, k) in enumerate(zip(client.y_test, keras))
    ]


def _write_predictions(path: Path, rows: list[dict], formats: Sequence[str]) -> None:
    """``predictions.csv``: client, test window (index in the client's test windows),
    label, Keras' class and each format's class, so a device's outputs can be compared
    window by window."""
    import csv

    with atomic_file(path, text=True) as handle:
        writer = csv.DictWriter(handle, ["client", "window", "label", "keras", *formats])
        writer.writeheader()
        writer.writerows(rows)


def _export_one(
    run: RunModels,
    client_id: int,
    fmt: str,
    prepared: Prepared,
    source: _Reference,
    trained: _Reference,
    out: Path,
    quantization_aware: dict | None = None,
    calibration: dict | None = None,
) -> dict:
    """Convert ``prepared`` (made from ``source``), write the file and its metadata, verify
    it against ``trained``. The entry's ``predictions`` (each test window's class) are for
    the caller to take out."""
    client = run.client(client_id)
    content = to_tflite(prepared.model, fmt, prepared.inputs(client.x_train))
    path = out / f"client{client_id}" / f"{fmt}.tflite"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes(path, content)
    meta = _metadata(run, client_id, fmt, content, prepared)
    if quantization_aware is not None:
        meta["quantization_aware"] = quantization_aware
    if calibration is not None:
        meta["calibration"] = calibration
    write_json(path.with_suffix(".json"), meta, sort_keys=False)
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
        "input_scaling": meta["input_scaling"],
        "logit_range": meta["logit_range"],
        "tied_windows": check.tied_windows,
        "predictions": check.predictions,
    }
    entry.update(device_columns(content, prepared.inputs(client.x_test), check.predictions))
    entry.update(model_health(prepared, client.x_train, content, check.predictions))
    if calibration is not None:
        entry["calibration"] = calibration["chosen"]
    if source is not trained:  # a fine-tuned copy: also compare with the model converted
        entry["qat_keras_acc"] = source.acc
        entry["qat_agreement"] = float(np.mean(check.predictions == source.probs.argmax(-1)))
    return entry


def model_health(
    prepared: Prepared, x_train: np.ndarray, content: bytes, predictions: np.ndarray
) -> dict:
    """``zero_layer``: the first layer of the converted model that is zero on every training
    window (:mod:`edge_export.zero_layers`; the converter calibrates on those windows), with
    the classes the file gave the test windows, else ``None``; ``requantization``: the
    file's largest requantization scale (:mod:`edge_export.requantization`; ``None`` in a
    float file)."""
    zero = first_zero_layer(prepared.model, prepared.inputs(x_train))
    zero_layer = None
    if zero is not None:
        zero_layer = zero.as_dict() | {"test_classes": sorted({int(c) for c in predictions})}
    worst = largest(content)
    return {"zero_layer": zero_layer, "requantization": worst.as_dict() if worst else None}


def device_columns(content: bytes, x: np.ndarray, predictions: np.ndarray) -> dict:
    """The report's device fields of one file: per runtime of :data:`RUNTIMES` (``litert``,
    ``tflite_runtime``) what :func:`edge_export.verify.device_run` found, with the windows of
    ``x`` whose class equals ``predictions`` (the file's ``predictions.csv`` column, from
    TensorFlow's interpreter); LiteRT's latency (1 thread, median of
    :data:`LATENCY_INVOKES` invokes, the CPU named). ``cortex_m`` is the slot for the
    Cortex-M builds (``{target: {flash_bytes, ram_bytes, instructions: {kernels: count}}}``),
    filled where they are built; ``tflite_runtime_loads`` keeps the earlier reports' field."""
    cpu = cpu_name()
    fields: dict = {}
    for runtime in RUNTIMES:
        run = device_run(runtime, content, x, LATENCY_INVOKES if runtime == "litert" else 0)
        record: dict = {"runtime": run.runtime, "loads": run.loads}
        if run.loads is not None:
            record.update(resolver=run.resolver, error=run.error)
        if run.predictions is not None:
            agreeing = int(np.sum(run.predictions == predictions))
            record.update(agreeing_windows=agreeing, windows=len(predictions))
        if run.latency_ms is not None:
            record.update(latency_ms=run.latency_ms, invokes=run.invokes, threads=1, cpu=cpu)
        fields[runtime] = record
    fields["tflite_runtime_loads"] = fields["tflite_runtime"]["loads"]
    fields["cortex_m"] = {}
    return fields


def _micro(
    out: Path, entry: dict, client: ClientData, prepared: Prepared, target: MicroTarget | None
) -> dict:
    """The TFLite Micro project of an exported file (``client<ID>/micro_<format>/``: model
    files, test vectors from the client's test windows, host and Cortex-M builds), and its
    report fields (with ``target.tflm_dir``: its builds' too, :class:`MicroTarget`)."""
    target = target or MicroTarget()
    path = out / entry["path"]
    content = path.read_bytes()
    meta = json.loads(path.with_suffix(".json").read_text())
    fmt = entry["format"].replace("-", "_")
    project = export_micro_project(
        content, path.parent / f"micro_{fmt}", f"client{entry['client']}_{fmt}",
        prepared.inputs(client.x_test), meta["labels"], client.y_test, meta["normalization"],
        title=f"client {entry['client']}'s {entry['format']} model", target=target.target,
    )  # fmt: skip
    latency = {} if project.latency_ms is None else {"micro_latency_ms": project.latency_ms}
    return {
        **latency,
        **target.measure(project.folder, project.ident),
        "micro_path": str(project.source.relative_to(out)),
        "micro_project": str(project.folder.relative_to(out)),
        "micro_ops": project.ops,
        "micro_arena_bytes": project.arena_bytes,
        "micro_arena_headroom_bytes": project.headroom_bytes,
        "micro_arena_measured": project.arena_measured,
    }


def report_markdown(entries: Sequence[dict]) -> str:
    """The report as Markdown: one row per file, one per format, and the device budget."""
    head = (
        "| client | format | KB | gzip KB | sparse stored | int8 preparation | Keras acc "
        "| TFLite acc | Δ acc | agreement | flipped (tied) | max Δp | ms XNNPACK | ms reference "
        "| LiteRT | tflite-runtime | micro arena |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = "".join(
        f"| {e['client']} | {e['format']} | {e['bytes'] / 1024:.1f} | {e['gzip_bytes'] / 1024:.1f} "
        f"| {'yes' if e['sparse_encoded'] else 'no'} | {e.get('calibration', '')} "
        f"| {e['keras_acc']:.4f} | {e['tflite_acc']:.4f} | {e['acc_delta']:+.4f} "
        f"| {e['agreement']:.4f} | {_flipped(e)} | {e['max_prob_diff']:.4f} "
        f"| {e['latency_ms']:.3f} "
        f"| {e['latency_ref_ms']:.3f} | {_device(e, 'litert')} | {_device(e, 'tflite_runtime')} "
        f"| {_arena(e)} |\n"
        for e in entries
    )
    return (
        head + rows + summary_markdown(entries) + budget_markdown(entries)
        + cortex_m_markdown(entries) + device_notes(entries)
    )  # fmt: skip


def summary_markdown(entries: Sequence[dict]) -> str:
    """One line per format over all clients: sizes, accuracy change, flips (and ties), the
    most test windows one client lost, latency, arena."""
    lines = [
        "\n| format | files | KB min / median / max | gzip KB median | Δ acc min / max (pp) "
        "| flipped (tied; clients > 1 pp) | most windows lost by a client | ms XNNPACK "
        "| ms reference | micro arena max |\n",
        "|---|---|---|---|---|---|---|---|---|---|\n",
    ]
    for fmt in dict.fromkeys(e["format"] for e in entries):
        group = [e for e in entries if e["format"] == fmt]
        kb = [e["bytes"] / 1024 for e in group]
        delta = [100 * e["acc_delta"] for e in group]
        flipped = sum(e.get("flipped_windows", 0) for e in group)
        tied = sum(e.get("tied_windows", 0) for e in group)
        windows = sum(e.get("test_windows", 0) for e in group)
        flips = f"{flipped}/{windows}" if windows else "?"
        over = sum(abs(d) > 1.0 for d in delta)
        lost = max(round(-e["acc_delta"] * e.get("test_windows", 0)) for e in group)
        arenas = [e["micro_arena_bytes"] for e in group if "micro_arena_bytes" in e]
        arena = f"{max(arenas) / 1024:.1f} KB" if arenas else ""
        lines.append(
            f"| {fmt} | {len(group)} | {min(kb):.1f} / {np.median(kb):.1f} / {max(kb):.1f} "
            f"| {np.median([e['gzip_bytes'] for e in group]) / 1024:.1f} "
            f"| {min(delta):+.1f} / {max(delta):+.1f} | {flips} ({tied}; {over}) | {max(lost, 0)} "
            f"| {np.median([e['latency_ms'] for e in group]):.3f} "
            f"| {np.median([e['latency_ref_ms'] for e in group]):.3f} | {arena} |\n"
        )
    return "".join(lines)


def budget_markdown(entries: Sequence[dict]) -> str:
    """Per format, what a device must hold and spend: the model in flash, the tensor arena in
    RAM (with ``--micro``: measured with TFLite Micro, plus headroom), the time per window of
    TFLite Micro's reference kernels on this host (``--micro``), whether LiteRT's default
    interpreter loads every file and its time per window (median over the files of each
    file's median, 1 thread). The Cortex-M builds have their own table
    (:func:`edge_export.micro.cortex_m.cortex_m_markdown`)."""
    lines = [
        "\n| format | flash: model KB (max) | RAM: arena KB (max, with headroom) "
        "| TFLite Micro ms per window on this host (median) | LiteRT default interpreter loads "
        "| LiteRT ms per window (median) |\n",
        "|---|---|---|---|---|---|\n",
    ]
    for fmt in dict.fromkeys(e["format"] for e in entries):
        group = [e for e in entries if e["format"] == fmt]
        arena = [
            e["micro_arena_bytes"] + e.get("micro_arena_headroom_bytes", 0)
            for e in group
            if "micro_arena_bytes" in e
        ]
        tflm = [e["micro_latency_ms"] for e in group if "micro_latency_ms" in e]
        litert = [e["litert"] for e in group if e.get("litert", {}).get("loads") is not None]
        loads = f"{sum(r['loads'] for r in litert)}/{len(group)} files" if litert else "?"
        times = [r["latency_ms"] for r in litert if "latency_ms" in r]
        fallback = [r["resolver"] for r in litert if "latency_ms" in r and not r["loads"]]
        timed = f"{np.median(times):.3f}" if times else ""
        if fallback:  # the time of a file the default interpreter refuses is the fallback's
            timed += f" ({len(fallback)} with {fallback[0]})"
        lines.append(
            f"| {fmt} | {max(e['bytes'] for e in group) / 1024:.1f} "
            f"| {f'{max(arena) / 1024:.1f}' if arena else '(--micro)'} "
            f"| {f'{np.median(tflm):.3f}' if tflm else '(--micro)'} | {loads} "
            f"| {timed} |\n"
        )
    return "".join(lines)


def device_notes(entries: Sequence[dict]) -> str:
    """How the device columns were measured (runtime, threads, invokes, CPU) and, per file a
    runtime's default interpreter refuses, its error and the op resolver that runs it."""
    how = ""
    timed = [e["litert"] for e in entries if "latency_ms" in e.get("litert", {})]
    if timed:
        first = timed[0]
        how = (
            f"\nLiteRT: {first['runtime']}, default interpreter (default delegates: XNNPACK), "
            f"{first['threads']} thread, median of {first['invokes']} invokes per file, "
            f"on {first['cpu']}. Agreement: test windows whose class equals the file's "
            "`predictions.csv` column (TensorFlow's interpreter).\n"
        )
    refused = []
    for fmt in dict.fromkeys(e["format"] for e in entries):
        group = [e for e in entries if e["format"] == fmt]
        for runtime in RUNTIMES:
            failed = [e for e in group if e.get(runtime, {}).get("loads") is False]
            if not failed:
                continue
            first = failed[0][runtime]
            resolvers = {e[runtime].get("resolver", "") for e in failed}
            fix = (
                f"they run with `experimental_op_resolver_type=OpResolverType.{first['resolver']}`"
                if resolvers == {first["resolver"]} and first["resolver"]
                else "see each file's `resolver` in export_report.json"
            )
            clients = ", ".join(str(e["client"]) for e in failed)
            refused.append(
                f"- {fmt}: {first['runtime']}'s default interpreter refuses {len(failed)} of "
                f"{len(group)} files (clients {clients}; client {failed[0]['client']}: "
                f"`{first['error']}`); {fix}.{_why_refused(failed)}\n"
            )
    return how + ("\n" + "".join(refused) if refused else "") + zero_layer_notes(entries)


def _why_refused(failed: Sequence[dict]) -> str:
    """The refused files whose largest requantization scale is at XNNPACK's limit or above
    (:mod:`edge_export.requantization`), in one sentence; empty if there are none."""
    over = [e for e in failed if (e.get("requantization") or {}).get("scale", 0.0) >= XNNPACK_LIMIT]
    if not over:
        return ""
    parts = "; ".join(
        f"client {e['client']}'s op {r['op_index']} ({r['op']}, `{r['tensor']}`), "
        f"{r['scale']:.4g} (output scale {r['output_scale']:.2g})"
        for e in over
        for r in [e["requantization"]]
    )
    return (
        f" XNNPACK's int8 layers need input scale x weight scale / output scale below "
        f"{XNNPACK_LIMIT:g}; at or above it: {parts}"
    )


def zero_layer_notes(entries: Sequence[dict]) -> str:
    """One line per file whose model has a layer that is zero on every training window
    (:mod:`edge_export.zero_layers`), with the classes the file gave the test windows."""
    lines = []
    for e in entries:
        zero = e.get("zero_layer")
        if not zero:
            continue
        classes = zero["test_classes"]
        given = (
            f"the file gives all {e['test_windows']} test windows class {classes[0]}, so its "
            "accuracy is the share of its test windows in that class"
            if len(classes) == 1
            else f"the file gives its test windows {len(classes)} classes"
        )
        lines.append(
            f"- {e['format']}, client {e['client']}: layer `{zero['layer']}` ({zero['units']} "
            f"values) is zero on every training window; {given}.\n"
        )
    if not lines:
        return ""
    return "\nLayers zero on every training window (dead units):\n" + "".join(lines)


def _device(entry: dict, runtime: str) -> str:
    """Whether ``runtime``'s default interpreter loads and runs the file, and on how many test
    windows it agrees with ``predictions.csv`` (with the fallback resolver where it does not
    load; :func:`device_notes` names it)."""
    record = entry.get(runtime)
    if record is None:  # a report written before the device columns
        loads = entry.get("tflite_runtime_loads") if runtime == "tflite_runtime" else None
        return "not installed" if loads is None else ("loads" if loads else "fails")
    if record["loads"] is None:
        return "not installed"
    agree = f"{record['agreeing_windows']}/{record['windows']}" if "windows" in record else ""
    if record["loads"]:
        return f"loads, {agree}"
    if record.get("resolver"):
        return f"**not with default delegates**; {record['resolver']}: {agree}"
    return "**does not load**"


def _flipped(entry: dict) -> str:
    """Test windows whose predicted class differs from Keras, of all the client's windows."""
    if "flipped_windows" not in entry:
        return ""
    tied = f" ({entry['tied_windows']})" if "tied_windows" in entry else ""
    return f"{entry['flipped_windows']}/{entry['test_windows']}{tied}"


def _arena(entry: dict) -> str:
    if "micro_arena_bytes" not in entry:
        return ""
    kb = entry["micro_arena_bytes"] / 1024
    text = f"{kb:.1f} KB" + ("" if entry["micro_arena_measured"] else " (upper bound)")
    if "micro_arena_headroom_bytes" in entry:
        text += f" + {entry['micro_arena_headroom_bytes'] / 1024:.1f} KB headroom"
    return text
