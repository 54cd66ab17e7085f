"""Export a clustering run's assigner: one small float32 TFLite file per client that answers
"which cluster is this sample?" as the run answered it for its own objects.

Fed-HIRE, k-FED and federated k-means runs (``fedprune train fedhire|kfed|fedkmeans``) keep
``assigner.npz`` (:mod:`fedprune.runs.assigner`, deploy kind ``assigner``).
For each client ``l`` this module builds a graph of TFLite builtin ops:

* input ``sample``: float32 ``[1, d]``, one raw row in the table's units and column order
  (the ``.json`` lists the columns), *before* the run's encoding;
* the encoding inside the graph: ``z = (sample - mean) * (1 / scale)`` (SUB, MUL) where the
  run z-scored the table (the UCI tables); none for your own tables. The ``.json`` records the
  constants too, for reference only: do not apply them again;
* the key of every centre ``j``: ``Σ_z a_jz (z_z - c_jz)²`` (SQUARED_DIFFERENCE, MUL, SUM)
  plus a per-centre bias (ADD; Fed-HIRE's ``-2 ln(γ_j w_j)``), or for Fed-HIRE's inverse
  similarity ``ln(sqrt(·) + 1e-12) - ln(γ_j w_j)`` (SQRT, ADD, LOG, SUB); the lowest key
  (ARG_MIN) picks the centre;
* output ``cluster``: int32 ``[1]``, the cluster index in ``0..k*-1`` that the run gives the
  centre (GATHER of the client's centre -> cluster table; RESHAPE), i.e. the value
  ``labels.npz``'s ``client<l>`` holds for the run's own objects.

Centres per method: Fed-HIRE, the client's clusterlets (FCPL's winner rule of Eq. 4 with its
feature weights ``M`` and factors ``γ w``) and the server's clusterlet -> cluster map (which
the server's hierarchy, representation and k-modes decided once per clusterlet); k-FED, the
client's local k-means centres and their server clusters; federated k-means, the global
centroids (every client's file is the same). Not a per-sample function: FCPL's factors
``γ w`` move from object to object within an epoch, so the run's objects met slightly
different ones; the file uses one value per clusterlet (see the assigner module), and the
report says how often that changes a run object's cluster.

Written into ``--out``: ``client<l>/assigner.tflite`` and ``assigner.json`` (input, encoding,
output, clusters, rule, source run), and ``export_report.json`` / ``.md``: per client the
size, the agreement of the TFLite file with the run's own labels on every object of the
client (and of the float64 reference, which separates the rule from float32 rounding), and
the latency per sample.

The helpers up to :func:`load_job` import no TensorFlow, so the command line checks the run,
the options and the data before the heavy import.
"""

from __future__ import annotations

import dataclasses
import gzip
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from fedprune.errors import ConfigError, DataError
from fedprune.runs import names
from fedprune.runs.assigner import Assigner, read_assigner
from fedprune.runs.files import damaged, read_npz, write_bytes, write_json, write_text
from fedprune.runs.finished import FinishedRun, open_finished

if TYPE_CHECKING:
    import tensorflow as tf

__all__ = [
    "ASSIGNER_FORMATS",
    "AssignerJob",
    "assigner_tflite",
    "check_assigner_options",
    "export_assigners",
    "is_assigner_run",
    "load_job",
    "report_markdown",
    "run_assigner",
]

ASSIGNER_FORMATS = ("float32",)
# the methods whose runs keep an assigner (fedprune.configs.fedhire's configurations)
CLUSTERING_METHODS = ("fedhire", "kfed", "fedkmeans")
FILE = "assigner"  # client<l>/assigner.tflite and assigner.json


def is_assigner_run(run: FinishedRun) -> bool:
    """Whether ``run`` deploys an assigner (its manifest's kind). A Fed-HIRE, k-FED or
    federated k-means run without a deploy manifest is a one-line
    :class:`DataError` that says what it holds and to train it again."""
    if "deploy" not in run.summary and run.method in CLUSTERING_METHODS:
        raise DataError(older_run(run.path, run.method))
    return run.deploy.kind == "assigner"


def older_run(path: Path, method: str) -> str:
    """Why a clustering run without a deploy manifest has no assigner, and what to do."""
    kept = sorted(p.name for p in Path(path).iterdir() if not p.name.startswith("."))
    return (
        f"{path}: this {method} run holds {', '.join(kept) or 'no files'} but no "
        f"{names.ASSIGNER}: fedprune versions before the assigner kept only the cluster of "
        "each of the run's objects, which cannot label a new sample; train it again with this "
        "version into a new --out (the same command with another --out) to get an assigner, "
        "then export that run"
    )


def check_assigner_options(formats: str | None, micro: bool) -> list[str]:
    """The formats of an assigner export (``--formats``; ``None``: float32); anything else
    is a :class:`ConfigError` that names what is available."""
    chosen = ["float32"] if formats is None else [f.strip() for f in formats.split(",")]
    chosen = [f for f in chosen if f]
    bad = [f for f in chosen if f not in ASSIGNER_FORMATS]
    if bad or not chosen:
        raise ConfigError(
            f"--formats {formats}: a clustering run's assigner is exported as float32 only "
            "(a few distances and one comparison per sample, nothing to quantize); pass "
            "--formats float32 or leave --formats out"
        )
    if micro:
        raise ConfigError(
            "--micro: TFLite Micro arrays are made for the int8 classifier files; a "
            "clustering run's assigner is one float32 .tflite per client (leave --micro out)"
        )
    return chosen


@dataclasses.dataclass(frozen=True)
class AssignerJob:
    """What an assigner export needs, read and checked: the run, its assigner, the clients
    to export (their places in the run's client order), each one's raw objects and the run's
    labels of them, and every client's own id (``ids[l]``: your table's id of client ``l``,
    by which its folder and files are named; 0 .. L-1 for a built-in table)."""

    run: FinishedRun
    assigner: Assigner
    clients: list[int]
    samples: list[np.ndarray]
    labels: list[np.ndarray]
    ids: tuple[int, ...] = ()

    def id_of(self, client: int) -> int:
        """The own id of the client at place ``client``."""
        return self.ids[client] if self.ids else client


def load_job(
    run_dir: str | os.PathLike,
    clients: Sequence[int] | None = None,
    data_dir: str | os.PathLike | None = None,
    client_x: Sequence[np.ndarray] | None = None,
) -> AssignerJob:
    """Read the run's assigner and labels and its clients' raw objects, loaded again as the
    manifest's data recipe says, or ``client_x`` (one (n_l, d) array per client as the table
    holds them: the table you gave the run in Python); ``clients``: the client ids to
    export (your table's ids, as ``summary.json``'s ``client_ids`` lists them; ``None``:
    all). They must be the run's objects. Imports no TensorFlow."""
    from fedprune.data.registry import table_clients

    run = open_finished(run_dir)
    if not is_assigner_run(run):
        raise ConfigError(
            f"{run.path} deploys {run.deploy.kind!r} models, not an assigner; export it "
            "without the assigner options"
        )
    assigner = read_assigner(run.path)
    count = len(assigner.clients)
    ids = tuple(int(i) for i in run.summary.get("client_ids", range(count)))
    if len(ids) != count:
        raise damaged(
            run.path / names.SUMMARY, ValueError(f"{len(ids)} client_ids for {count} clients")
        )
    place = {cid: i for i, cid in enumerate(ids)}
    chosen = list(range(count)) if clients is None else [place.get(c, -1) for c in clients]
    unknown = [c for c, i in zip(clients or (), chosen) if i < 0]
    if unknown:
        known = f"0..{count - 1}" if ids == tuple(range(count)) else ", ".join(map(str, ids))
        raise ConfigError(
            f"--clients: {', '.join(map(str, unknown))} not in the run; its clients are {known}"
        )
    stored = read_npz(run.path / names.LABELS)
    try:
        labels = [np.asarray(stored[f"client{i}"]) for i in range(count)]
    except KeyError as err:
        raise damaged(run.path / names.LABELS, err) from None
    if client_x is not None:
        samples = [np.asarray(x, dtype=np.float64) for x in client_x]
        where = "client_x"
    else:
        try:
            samples = table_clients(run.deploy.data, data_dir)
        except KeyError as err:
            raise DataError(
                f"{run.path}: its data recipe has no {err.args[0]!r}; re-run training with "
                "this version"
            ) from None
        where = f"the data its recipe loads ({run.deploy.data.get('dataset')})"
    differs = assigner.same_objects(samples)
    if differs is None and [len(x) for x in samples] != [len(y) for y in labels]:
        differs = "other numbers of objects than labels.npz"
    if differs is not None:
        raise DataError(
            f"{run.path}: {where} are not the objects the run clustered ({differs}); pass "
            "the --data-dir the run was trained on (a table given to the run in Python: pass "
            "its clients' arrays as client_x)"
        )
    return AssignerJob(run, assigner, chosen, samples, labels, ids)


def assigner_module(assigner: Assigner, client: int) -> tf.Module:
    """Client ``client``'s assigner as a ``tf.Module`` whose ``__call__`` takes one raw
    sample ``[1, d]`` float32 and returns its cluster ``[1]`` int32 (module docstring)."""
    import tensorflow as tf

    c = assigner.clients[client]
    d, k = assigner.features, c.k
    f32 = np.float32
    shift = None if assigner.mean is None else tf.constant(assigner.mean.astype(f32))
    inv_scale = None if assigner.scale is None else tf.constant((1.0 / assigner.scale).astype(f32))
    centres = tf.constant(c.centres.astype(f32))
    weights = None if c.weights is None else tf.constant(c.weights.astype(f32))
    lnf = np.zeros(k) if c.log_factors is None else c.log_factors
    inverse = assigner.similarity == "inverse"
    bias = None
    if inverse:
        bias = tf.constant((-lnf).astype(f32))
    elif np.any(lnf != 0):
        bias = tf.constant((-2.0 * lnf).astype(f32))
    identity = np.array_equal(c.clusters, np.arange(k))
    table = tf.constant(c.clusters.astype(np.int32))

    class Assign(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, d], tf.float32, name="sample")])
        def __call__(self, sample: tf.Tensor) -> dict[str, tf.Tensor]:
            z = sample
            if shift is not None:
                z = (z - shift) * inv_scale
            diff2 = tf.math.squared_difference(z, centres)  # [k, d]
            if weights is not None:
                diff2 = diff2 * weights
            key = tf.reduce_sum(diff2, axis=1)  # [k]
            if inverse:
                key = tf.math.log(tf.sqrt(key) + 1e-12)
            if bias is not None:
                key = key + bias
            centre = tf.argmin(key, axis=0, output_type=tf.int32)
            cluster = centre if identity else tf.gather(table, centre)
            return {"cluster": tf.reshape(cluster, [1])}

    return Assign()


def assigner_tflite(assigner: Assigner, client: int) -> bytes:
    """Client ``client``'s assigner as a float32 TFLite flatbuffer (builtin ops only)."""
    import tensorflow as tf

    from fedprune.quiet import native_output

    module = assigner_module(assigner, client)
    function = module.__call__.get_concrete_function()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([function], module)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    with native_output():
        return converter.convert()


def builtin_ops(content: bytes) -> list[str]:
    """The names of the builtin ops the flatbuffer uses, sorted."""
    from tensorflow.lite.python import schema_py_generated as schema

    codes = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    model = schema.ModelT.InitFromPackedBuf(content, 0)
    found = set()
    for op in model.operatorCodes:
        code = max(int(op.builtinCode), int(op.deprecatedBuiltinCode))
        found.add(codes.get(code, str(code)))
    return sorted(found)


def run_assigner(content: bytes, x: np.ndarray) -> tuple[np.ndarray, float]:
    """The cluster of every raw sample of ``x`` (n, d) by the TFLite file (one invoke per
    sample) and the median latency per sample (ms)."""
    import tensorflow as tf

    from fedprune.quiet import native_output

    with native_output():  # "INFO: Created TensorFlow Lite XNNPACK delegate for CPU."
        interpreter = tf.lite.Interpreter(model_content=content, num_threads=1)
        interpreter.allocate_tensors()
        inp = interpreter.get_input_details()[0]
        out = interpreter.get_output_details()[0]
        interpreter.set_tensor(inp["index"], np.zeros(inp["shape"], np.float32))
        interpreter.invoke()
    clusters = np.empty(len(x), dtype=np.int64)
    times = []
    for i, row in enumerate(np.asarray(x, dtype=np.float32)):
        interpreter.set_tensor(inp["index"], row[None])
        start = time.perf_counter()
        interpreter.invoke()
        times.append(time.perf_counter() - start)
        clusters[i] = int(interpreter.get_tensor(out["index"])[0])
    return clusters, 1000.0 * float(np.median(times)) if times else 0.0


def _metadata(job: AssignerJob, client: int, content: bytes) -> dict:
    a = job.assigner
    encoding: dict = {
        "kind": "none",
        "applied": "nothing: the table's values are clustered as given",
    }
    if a.mean is not None:
        encoding = {
            "kind": "z-score per column: (x - mean) / scale",
            "applied": "inside the model; give it the raw sample and do not apply these again",
            "mean": [float(v) for v in a.mean],
            "scale": [float(v) for v in a.scale],
        }
    return {
        "source_run": str(job.run.path),
        "method": a.method,
        "dataset": job.run.summary.get("dataset"),
        "client": job.id_of(client),
        "format": "float32",
        "input": {
            "name": "sample",
            "shape": [1, a.features],
            "dtype": "float32",
            "columns": list(a.columns) if a.columns is not None else None,
            "what": "one raw sample as the table holds it, columns in this order (every "
            "column a number; categorical columns as the table's numeric codes, not "
            "one-hot encoded)",
        },
        "encoding": encoding,
        "output": {
            "name": "cluster",
            "shape": [1],
            "dtype": "int32",
            "what": f"the cluster index in 0..{a.k_star - 1} the run gives this sample (the "
            f"values of labels.npz's client{client} for the run's own objects)",
        },
        "clusters": a.k_star,
        "centres": a.clients[client].k,
        "rule": a.rule(),
        "ops": builtin_ops(content),
    }


def export_assigners(job: AssignerJob, out: str | os.PathLike, progress: bool = True) -> list[dict]:
    """Build, write and check every chosen client's assigner; writes ``export_report.json``
    and ``.md`` into ``out`` and returns the report entries (one per client)."""
    from tqdm import tqdm

    out = Path(out)
    entries = []
    with tqdm(total=len(job.clients), desc="export", unit="file", disable=not progress) as bar:
        for client in job.clients:
            content = assigner_tflite(job.assigner, client)
            folder = out / f"client{job.id_of(client)}"
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{FILE}.tflite"
            write_bytes(path, content)
            meta = _metadata(job, client, content)
            write_json(path.with_suffix(".json"), meta, sort_keys=False)
            entry = {
                "client": job.id_of(client),
                "format": "float32",
                "path": str(path.relative_to(out)),
                "bytes": len(content),
                "gzip_bytes": len(gzip.compress(content, 9)),
                "centres": meta["centres"],
                "clusters": meta["clusters"],
                "ops": meta["ops"],
            }
            x, run_labels = job.samples[client], job.labels[client]
            lite, latency = run_assigner(content, x)
            reference = job.assigner.assign(client, x)
            entry.update(
                objects=len(x),
                agreement=float(np.mean(lite == run_labels)),
                differing_objects=int(np.sum(lite != run_labels)),
                reference_agreement=float(np.mean(reference == run_labels)),
                tflite_vs_reference=float(np.mean(lite == reference)),
                latency_ms=latency,
            )
            entries.append(entry)
            bar.update()
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "export_report.json", entries, sort_keys=False)
    write_text(out / "export_report.md", report_markdown(entries))
    return entries


def report_markdown(entries: Sequence[dict]) -> str:
    """One table row per client, then the agreement over all exported clients."""

    def share(value: float) -> str:
        return f"{100 * value:.2f} %"

    lines = [
        "| client | KB | gzip KB | centres | clusters | objects | agreement with the run "
        "| float64 reference | ms/sample |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for e in entries:
        lines.append(
            f"| {e['client']} | {e['bytes'] / 1024:.1f} | {e['gzip_bytes'] / 1024:.1f} | "
            f"{e['centres']} | {e['clusters']} | {e['objects']} | {share(e['agreement'])} | "
            f"{share(e['reference_agreement'])} | {e['latency_ms']:.4f} |"
        )
    total = sum(e["objects"] for e in entries)
    same = total - sum(e["differing_objects"] for e in entries)
    lines.append("")
    lines.append(
        f"All exported clients: {same} of {total} objects ({share(same / max(total, 1))}) "
        "get the run's own cluster."
    )
    return "\n".join(lines) + "\n"
