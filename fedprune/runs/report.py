"""The human summary printed at the end of a run (``fedprune train``; ``--json`` prints the
``summary.json`` itself).

A few lines: the method and dataset, the headline numbers under their names, the wall time,
where the files are and the commands that come next (plot, TensorBoard, export). The numbers
are read from ``summary.json`` by key: every method's keys are listed in :data:`HEADLINES`
with the words and units shown; keys a method does not write are skipped, and everything else
stays in ``summary.json``. Imports no TensorFlow.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from fedprune.runs import names


def _pct(value: float) -> str:
    return f"{100 * value:.2f} %"


def _pp(value: float) -> str:
    return f"{100 * value:.2f} pp"


def _mb(value: float) -> str:
    return f"{value:,.1f} MB"


def _plain(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


# (summary key, words, how the value is shown), in the order printed
HEADLINES: tuple[tuple[str, str, Callable[[object], str]], ...] = (
    ("avg_acc", "mean client accuracy (each client's test data)", _pct),
    ("fairness", "fairness (std of the client accuracies)", _pp),
    ("final_acc", "final accuracy (mean over clients, last round)", _pct),
    ("peak_acc", "peak accuracy (any round)", _pct),
    ("rounds_to_90pct_peak", "rounds to 90 % of the peak", _plain),
    ("acc_init", "accuracy of the clients' initial clusters", _pct),
    ("acc_final", "accuracy of the final clusters (majority labels)", _pct),
    ("acc", "clustering accuracy (clusters matched to classes)", _pct),
    ("purity", "purity", _plain),
    ("nmi", "normalized mutual information", _plain),
    ("k_star", "groups found (k*)", _plain),
    ("clusters_found", "clusters found", _plain),
    ("communities", "communities", _plain),
    ("ari", "adjusted Rand index against the true groups", _plain),
    ("mean_stability", "mean cluster stability between rounds", _plain),
    ("sparsity", "sparsity of the personal models", _pct),
    ("comm_mb_eq13", "communication (the paper's Eq. 13)", _mb),
    ("comm_mb_payload", "communication (bytes sent)", _mb),
    ("uplink_mb", "uplink", _mb),
    ("downlink_mb", "downlink", _mb),
    ("iterations", "iterations", _plain),
    ("rounds", "rounds", _plain),
)


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _clusters(value: object) -> str | None:
    if isinstance(value, Mapping) and value:
        sizes = [int(v) for v in value.values()]
        return f"{len(sizes)} (clients per cluster: {'/'.join(map(str, sizes))})"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def headline_lines(summary: Mapping) -> list[tuple[str, str]]:
    """(words, value) of every headline number ``summary`` has, in :data:`HEADLINES` order,
    with the personal accuracy after each fine-tuning length first."""
    lines = []
    for epochs, entry in sorted(
        (summary.get("finetune") or {}).items(), key=lambda item: int(item[0])
    ):
        fairness = entry.get("fairness")
        extra = f" (fairness {_pp(fairness)})" if isinstance(fairness, float) else ""
        lines.append(
            (
                f"personal accuracy after {epochs} fine-tuning epoch{'s' * (int(epochs) != 1)}",
                _pct(entry["avg_acc"]) + extra,
            )
        )
    clusters = _clusters(summary.get("clusters"))
    if clusters is not None:
        chosen = "clusters_chosen" in summary  # --clusters auto (cluster_choice.json)
        lines.append(("clusters (chosen from the data)" if chosen else "clusters", clusters))
    for key, words, shown in HEADLINES:
        value = summary.get(key)
        if key == "rounds" and "round" in summary:
            continue
        if value is None or isinstance(value, bool) or isinstance(value, Mapping | list):
            continue
        lines.append((words, shown(value)))
    return lines


def describe(summary: Mapping, path: str | os.PathLike, exports: bool | None = None) -> str:
    """The human summary of the finished run in ``path`` (see the module text).
    ``exports``: whether ``edge-export`` applies (default: the summary has a deploy
    manifest)."""
    path = Path(path)
    method = summary.get("method", "run")
    dataset = summary.get("dataset", "")
    seed = summary.get("seed")
    title = f"{method} on {dataset}" + (f", seed {seed}" if seed is not None else "")
    if "wall_s" in summary:
        title += f": finished in {_duration(float(summary['wall_s']))}"
    lines = [title]
    rows = headline_lines(summary)
    width = max((len(words) for words, _ in rows), default=0)
    lines += [f"  {words:<{width}}  {value}" for words, value in rows]
    present = (
        sorted(
            p.name + ("/" if p.is_dir() else "")
            for p in path.iterdir()
            if not p.name.startswith(".") and p.name != names.WORKER_LOGS
        )
        if path.is_dir()
        else []
    )
    lines.append(f"Files in {path}: {', '.join(present)}")
    lines.append("Next:")
    lines.append(f"  fedprune plot {path}                 # the curves as a PNG")
    lines.append(f"  tensorboard --logdir {path}")
    if exports if exports is not None else "deploy" in summary:
        # a clustering run's assigner is one float32 file per client: no --formats to choose
        kind = (summary.get("deploy") or {}).get("kind")
        formats = "" if kind == "assigner" else " --formats float32,int8"
        lines.append(f"  edge-export {path}{formats} --out export/{path.name}")
    lines.append("  (the same command with --json prints summary.json)")
    return "\n".join(lines)
