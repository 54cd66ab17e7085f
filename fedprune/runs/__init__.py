"""Run directories: every file a run writes, its writer and its reader.

* :mod:`~fedprune.runs.names`: the file names (and what each holds);
* :mod:`~fedprune.runs.run_dir`: :class:`RunDir`, the writer (config, checkpoint, metrics,
  summary), ``--out`` checks and clean-up of runs that never started;
* :mod:`~fedprune.runs.lock`: :class:`FolderLock`, one process per run directory;
* :mod:`~fedprune.runs.artefacts`: writer/reader pairs of the other files (clusters, masks,
  cluster/personal/community models, assignments);
* :mod:`~fedprune.runs.deploy`: the ``deploy`` manifest of ``summary.json``;
* :mod:`~fedprune.runs.finished`: :func:`open_finished`, the read-only view used by export and
  reproduction.
"""

from fedprune.runs.finished import FinishedRun, open_finished
from fedprune.runs.lock import FolderInUse, FolderLock
from fedprune.runs.names import CHECKPOINT, CONFIG, METRICS, SUMMARY, WORKER_LOGS
from fedprune.runs.run_dir import (
    RunDir,
    as_recorded,
    check_out_dir,
    owned_run_dir,
    recorded_config,
    removed_unless_started,
)

__all__ = [
    "CHECKPOINT",
    "CONFIG",
    "METRICS",
    "SUMMARY",
    "WORKER_LOGS",
    "FinishedRun",
    "FolderInUse",
    "FolderLock",
    "RunDir",
    "as_recorded",
    "check_out_dir",
    "open_finished",
    "owned_run_dir",
    "recorded_config",
    "removed_unless_started",
]
