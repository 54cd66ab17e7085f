"""The writer's view of a run directory: configuration, checkpoints, per-round metrics,
summary (:mod:`fedprune.runs.names` lists every file).

A run is resumable: after every round the state is checkpointed atomically; starting the same
command again continues after the last finished round (the metrics of later, unfinished rounds
are dropped), and a finished run (with ``summary.json``) is not recomputed. Starting a run in a
directory that holds a different configuration is an error, never a silent overwrite.

A run records its own files by their names in the folder, so that a moved (or copied) run
folder resumes, exports, fine-tunes and reopens: the data the Python API places in the run
(``dataset.npz``, :data:`~fedprune.runs.names.USER_DATASET`) is recorded as ``"dataset":
"dataset.npz"`` in ``config.json`` and in the deploy manifest's data recipe
(:func:`recorded_own_files`), and read back as that file of the folder where it is now
(:func:`resolved_own_files`). A record holding an absolute path reads too: where that
path no longer exists, the folder's own ``dataset.npz`` is taken (the SHA-256 the run
recorded still guards its bytes).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shutil
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from fedprune.errors import ConfigError, DataError
from fedprune.runs.events import EventLog
from fedprune.runs.files import (
    atomic_file,
    non_finite_place,
    read_json_object,
    write_json,
    write_npz,
)
from fedprune.runs.lock import FolderLock
from fedprune.runs.names import (
    CHECKPOINT,
    CONFIG,
    METRICS,
    STARTED,
    SUMMARY,
    USER_DATASET,
    WORKER_LOGS,
)
from fedprune.runs.npz import read_arrays

RUN_DIR_MODE = 0o700
"""A run directory fedprune makes is its user's alone: it may hold a copy of their data
(``dataset.npz``) and models trained on it. A folder that already exists keeps its mode."""


def check_out_dir(path: str | os.PathLike) -> Path:
    """``--out`` can hold a run: it is a directory or can be made one. One clear line if not
    (an empty name, which would mean the current folder; an existing file; a file on the way;
    a symbolic link whose target does not exist, there or on the way; no permission), before
    anything is loaded or made."""
    if not os.fspath(path).strip():
        raise ConfigError("--out is empty; give the run's own folder, e.g. --out runs/NAME")
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"--out {path} is a file, not a directory; choose another --out")
    existing = path
    while not existing.exists():
        if existing.is_symlink():  # dangling (or a loop): mkdir would fail with EEXIST
            raise ConfigError(
                f"--out {path}: {existing} is a symbolic link to {os.readlink(existing)!r}, "
                "which does not exist; make that folder or choose another --out"
            )
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"--out {path}: {existing} is a file; choose another --out")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"--out {path}: {existing} is not writable; choose another --out")
    return path


@contextlib.contextmanager
def owned_run_dir(path: str | os.PathLike, option: str = "--out") -> Iterator[Path]:
    """``path`` as this process's run directory for the block: its lock taken (a second
    process is refused before it touches anything, :mod:`fedprune.runs.lock`), and what the
    block made undone if it fails before its first round (:func:`removed_unless_started`)."""
    with FolderLock(path, option, mode=RUN_DIR_MODE), removed_unless_started(path):
        yield Path(path)


@contextlib.contextmanager
def removed_unless_started(path: str | os.PathLike) -> Iterator[None]:
    """Undo what a command made in ``path`` if it fails before its first round.

    A run that stops before it has a checkpoint, metrics or summary (bad parameters found
    late, missing data, an unreachable worker, Ctrl-C) must not leave a ``config.json`` that
    makes the corrected command fail ("holds a run with a different configuration"). Only
    what did not exist before the command is removed: ``config.json`` and the worker logs
    (the folder itself, where the command made it, goes with the lock of
    :func:`owned_run_dir`). Safe only while this process holds the folder's lock: another
    process's files would look like ours."""
    path = Path(path)
    had_config = (path / CONFIG).exists()
    had_logs = (path / WORKER_LOGS).exists()
    try:
        yield
    except BaseException:
        if not any((path / name).exists() for name in STARTED):
            if not had_config:
                (path / CONFIG).unlink(missing_ok=True)
            if not had_logs:
                shutil.rmtree(path / WORKER_LOGS, ignore_errors=True)
        raise


def _is_own_data(path: Path, value: object) -> bool:
    """Whether a recorded ``dataset`` names the run folder ``path``'s own ``dataset.npz``:
    its name alone, that file by any path, or (a run recorded by its absolute path, then
    moved) a ``dataset.npz`` that no longer exists while the folder holds one."""
    if not isinstance(value, str) or Path(value).name != USER_DATASET:
        return False
    own = path / USER_DATASET
    if value == USER_DATASET:
        return True
    try:
        if Path(value).resolve() == own.resolve():
            return True
        return not Path(value).exists() and own.exists()
    except (OSError, RuntimeError):  # a path that cannot be resolved is not ours
        return False


def _with_own_data(path: Path, record: Mapping, named: str) -> dict:
    """``record`` (a config or summary dict) with every ``dataset`` that names the folder's
    own data file (its top level and the deploy manifest's data recipe) set to ``named``."""
    record = dict(record)
    if _is_own_data(path, record.get("dataset")):
        record["dataset"] = named
    deploy = record.get("deploy")
    if isinstance(deploy, Mapping) and isinstance(deploy.get("data"), Mapping):
        data = deploy["data"]
        if _is_own_data(path, data.get("dataset")):
            record["deploy"] = {**deploy, "data": {**data, "dataset": named}}
    return record


def recorded_own_files(path: str | os.PathLike, record: Mapping) -> dict:
    """``record`` as the run folder ``path`` writes it: its own data file by its name in the
    folder (module docstring)."""
    return _with_own_data(Path(path), record, USER_DATASET)


def resolved_own_files(path: str | os.PathLike, record: Mapping) -> dict:
    """``record`` (read from the run folder ``path``) with its own data file as the path of
    that file in the folder where it is now, absolute (module docstring)."""
    return _with_own_data(Path(path), record, os.fspath((Path(path) / USER_DATASET).absolute()))


def recorded_config(path: str | os.PathLike) -> dict | None:
    """The ``config.json`` already in ``path``, or ``None``."""
    file = Path(path) / CONFIG
    if not file.exists():
        return None
    return read_json_object(file, "restore it from a backup or choose another --out")


def as_recorded(path: str | os.PathLike, config: Mapping, added_later: Mapping) -> dict:
    """``config`` as the run in ``path`` recorded it: an option in ``added_later`` (name ->
    default) that its ``config.json`` lacks is left out when it has that default, so a run
    made before the option existed resumes; any other value is a different configuration."""
    record = dict(config)
    old = recorded_config(path)
    if old is not None:
        for key, default in added_later.items():
            if key not in old and record.get(key) == default:
                del record[key]
    return record


class RunDir:
    """Files of one run; ``config`` must be JSON-serializable. Creating it makes the directory
    and writes ``config.json`` (or checks that the one there is the same)."""

    def __init__(self, path: str | os.PathLike, config: Mapping):
        self.path = Path(path)
        self.config = dict(config)
        self.events = EventLog(self.path)
        check_out_dir(self.path)
        self.path.mkdir(mode=RUN_DIR_MODE, parents=True, exist_ok=True)
        self.config = recorded_own_files(self.path, self.config)
        old = recorded_config(self.path)
        if old is not None:
            old = recorded_own_files(self.path, old)  # an older run's absolute record
            new = json.loads(json.dumps(self.config))  # tuples as lists, as in the file
            if old != new:
                diff = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
                raise ConfigError(
                    f"{self.path} holds a run with a different configuration "
                    f"(differs in: {', '.join(diff)}); choose another --out"
                )
        else:
            write_json(self.path / CONFIG, self.config)

    @classmethod
    def existing(cls, path: str | os.PathLike, config: Mapping) -> RunDir | None:
        """The run already in ``path`` (its ``config.json`` checked against ``config``), or
        ``None`` where ``path`` holds none yet. Callers make a new :class:`RunDir` only once
        their data and parameters are checked, so bad input leaves no directory behind."""
        return cls(path, config) if recorded_config(path) is not None else None

    # --- summary -----------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        return (self.path / SUMMARY).exists()

    def read_summary(self) -> dict:
        return read_json_object(
            self.path / SUMMARY,
            "delete it and run the same command again to recompute it from the last checkpoint",
        )

    def write_summary(self, summary: Mapping) -> None:
        write_json(self.path / SUMMARY, recorded_own_files(self.path, summary))

    # --- checkpoints ---------------------------------------------------------------------
    def save_checkpoint(
        self,
        round_num: int,
        arrays: Mapping[str, Sequence[np.ndarray]],
        scalars: Mapping[str, float] | None = None,
    ) -> None:
        """Store the state after ``round_num`` (1-based count of finished rounds)."""
        flat = {"round": np.array(round_num)}
        for name, seq in arrays.items():
            flat[f"{name}__n"] = np.array(len(seq))
            for i, a in enumerate(seq):
                flat[f"{name}__{i}"] = np.asarray(a)
        for name, value in (scalars or {}).items():
            flat[f"scalar__{name}"] = np.array(value)
        write_npz(self.path / CHECKPOINT, flat)

    def load_checkpoint(
        self, total: int | None = None, total_option: str = "--rounds"
    ) -> tuple[int, dict[str, list[np.ndarray]], dict[str, float]] | None:
        """(finished rounds, arrays, scalars) of the last checkpoint, or ``None``.

        What every run can check is checked here, before anything of the checkpoint is used:
        the file is a whole ``.npz`` of this layout, every floating-point array and scalar is
        finite, and the round is an integer in ``[0, total]`` (``total``: the rounds of this
        run, set by ``total_option``). Else one :class:`DataError` naming the file and what to
        do. The shapes are checked by :meth:`check_checkpoint_shapes`, where the caller knows
        its model."""
        path = self.path / CHECKPOINT
        if not path.exists():
            return None
        try:
            z = read_arrays(path)  # checked before anything is allocated
            arrays, scalars = {}, {}
            for key in z:
                if key.endswith("__n"):
                    name = key[:-3]
                    arrays[name] = [z[f"{name}__{i}"] for i in range(int(z[key]))]
                elif key.startswith("scalar__"):
                    scalars[key[len("scalar__") :]] = float(z[key])
            done = z["round"]
        except (OSError, ValueError, TypeError, KeyError, EOFError, zipfile.BadZipFile) as err:
            raise self.unusable_checkpoint(f"is damaged ({type(err).__name__}: {err})") from None
        if done.ndim != 0 or done.dtype.kind not in "iu":
            raise self.unusable_checkpoint(
                f"is damaged (its round is {done.tolist()!r}, not a whole number)"
            )
        done = int(done)
        if done < 0:
            raise self.unusable_checkpoint(f"is damaged (its round is {done}, below 0)")
        if total is not None and done > total:
            raise DataError(
                f"{path} is at round {done}, beyond the {total} round{'s' * (total != 1)} of "
                f"this run ({total_option}); give the {total_option} it was made with, or move "
                "it away and run the same command again to restart the run from round 0"
            )
        bad = non_finite_place(arrays, scalars)
        if bad is not None:
            raise self.unusable_checkpoint(
                f"holds non-finite numbers ({bad}), which would be trained on and reported"
            )
        return done, arrays, scalars

    def check_checkpoint_shapes(
        self,
        arrays: Mapping[str, Sequence[np.ndarray]],
        expected: Mapping[str, Sequence[tuple[int, ...]]],
    ) -> None:
        """The arrays :meth:`load_checkpoint` returned have the shapes this run's model and
        data give: ``expected`` maps a name to the shape of each array of that list. A name the
        checkpoint lacks is the restoring code's to refuse (some are optional)."""
        for name, shapes in expected.items():
            if name not in arrays:
                continue
            found = [tuple(np.shape(a)) for a in arrays[name]]
            shapes = [tuple(s) for s in shapes]
            if len(found) != len(shapes):
                detail = f"{len(found)} arrays {name!r} where this run has {len(shapes)}"
            else:
                wrong = [i for i, (f, s) in enumerate(zip(found, shapes)) if f != s]
                if not wrong:
                    continue
                i = wrong[0]
                detail = f"{name!r} array {i} has shape {found[i]}, this run's is {shapes[i]}"
            raise self.unusable_checkpoint(
                f"does not fit this run ({detail}): it was made for another model or data"
            )

    def check_checkpoint_labels(
        self, arrays: Mapping[str, Sequence[np.ndarray]], name: str, count: int | Sequence[int]
    ) -> None:
        """Every array ``name`` of the checkpoint holds whole numbers in ``[0, count)`` (a
        cluster per client, with ``count`` clusters; a sequence: each array's own count, as
        FedCRef's local clusters per client): else one :class:`DataError`, before an
        out-of-range cluster reaches the training."""
        found = arrays.get(name, [])
        counts = [count] * len(found) if isinstance(count, int) else list(count)
        for i, (a, k) in enumerate(zip(found, counts)):
            a = np.asarray(a)
            which = f"{name!r}" if isinstance(count, int) else f"{name!r} array {i}"
            if a.dtype.kind not in "iu":
                raise self.unusable_checkpoint(
                    f"is damaged ({which} holds {a.dtype} values, not cluster numbers)"
                )
            outside = a[(a < 0) | (a >= k)]
            if outside.size:
                raise self.unusable_checkpoint(
                    f"is damaged ({which} names cluster {int(outside[0])}; this run has "
                    f"clusters 0 to {k - 1})"
                )

    def unusable_checkpoint(self, what: str) -> DataError:
        """The one-line error for a checkpoint that cannot be resumed (``what`` it is)."""
        return DataError(
            f"{self.path / CHECKPOINT} {what}; move it away and run the same command again to "
            "restart the run from round 0"
        )

    def remove_checkpoint(self) -> None:
        (self.path / CHECKPOINT).unlink(missing_ok=True)

    # --- per-round metrics ---------------------------------------------------------------
    def metrics_rows(self) -> list[dict]:
        return read_metrics(self.path / METRICS)

    def truncate_metrics(self, rounds_done: int, round_key: str = "round") -> None:
        """Keep only the rows of rounds ``<= rounds_done`` (those the checkpoint covers); the
        TensorBoard event files are written again from them (:mod:`fedprune.runs.events`)."""
        rows = []
        for line, row in enumerate(self.metrics_rows(), 2):
            try:
                if int(row[round_key]) <= rounds_done:
                    rows.append(row)
            except (KeyError, ValueError):
                raise DataError(
                    f"{self.path / METRICS}, line {line}: no round number; delete the line (or "
                    "the file, losing the per-round history) and run the same command again"
                ) from None
        path = self.path / METRICS
        self.events.rebuild(rows)
        if not rows:
            path.unlink(missing_ok=True)
            return
        with atomic_file(path, text=True) as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)

    def append_metrics(self, row: Mapping) -> None:
        """Append one round's row. Where ``metrics.csv`` has fewer columns than the row,
        the file is rewritten with the new columns added at the end (older rows
        leave them empty), so a resumed run keeps one readable table; a column the row lacks
        stays empty in it. The row goes to the TensorBoard event files too."""
        path = self.path / METRICS
        existing = _header(path)
        header = existing or list(row)
        added = [key for key in row if key not in header]
        if added:
            rows = self.metrics_rows()
            header = header + added
            with atomic_file(path, text=True) as f:
                writer = csv.DictWriter(f, fieldnames=header, restval="")
                writer.writeheader()
                writer.writerows(rows)
        with open(path, "a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=header, restval="")
            if not existing:
                writer.writeheader()
            writer.writerow(row)
        self.events.add_row(row)


METRICS_FIX = (
    "delete the line (or the file, losing the per-round history) and run the same command again"
)


def _metrics_lines(path: Path) -> list[list[str]]:
    """The fields of every line of an existing ``metrics.csv``; bytes that are not UTF-8 or
    a line that is not CSV are one :class:`DataError` naming the line."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise DataError(
            f"{path}, line {line}: byte {data[err.start]:#04x} is not UTF-8 text; {METRICS_FIX}"
        ) from None
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        return list(reader)
    except csv.Error as err:
        raise DataError(f"{path}, line {reader.line_num}: not CSV ({err}); {METRICS_FIX}") from None


def _header(path: Path) -> list[str] | None:
    """The column names of an existing ``metrics.csv`` (``None`` when there is none yet or it
    is empty)."""
    if not path.exists():
        return None
    lines = _metrics_lines(path)
    return lines[0] if lines else None


def read_metrics(path: Path) -> list[dict]:
    """The rows of a ``metrics.csv`` as dicts of strings (``[]`` when there is none yet); a
    row with the wrong number of fields, or bytes that are not UTF-8 text, are a
    :class:`DataError` naming the line."""
    if not path.exists():
        return []
    lines = _metrics_lines(path)
    if not lines:
        return []
    header, rows = lines[0], []
    for line, fields in enumerate(lines[1:], 2):
        if not fields:  # a blank line, as csv.DictReader skips it
            continue
        if len(fields) != len(header):
            raise DataError(f"{path}, line {line}: wrong number of fields; {METRICS_FIX}")
        rows.append(dict(zip(header, fields)))
    return rows
