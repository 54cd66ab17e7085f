""":class:`Trainer`: one method, its configuration, and optionally your data and model, ready to
run into a run directory. Every public builder (:mod:`fedprune.api.builders`) returns one, and
``fedprune train`` runs the same object: there is one code path.

:meth:`Trainer.run` takes the run directory's lock (a second process is refused before it
touches anything, :mod:`fedprune.runs.lock`), places your data in it when you gave arrays
(``dataset.npz``, so that the run resumes, fine-tunes and exports from its directory alone: a
hard link to the one stored file of those arrays, :mod:`fedprune.data.user_store`),
starts the TFF workers you asked for, and trains, resumes or returns the finished run. What a
refused or failed start made is removed, so the corrected call is not blocked.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from fedprune.api.result import Result
from fedprune.checks import check_host_port
from fedprune.configs.fields import Config, python_error
from fedprune.data.tables import ClientTable, read_table_npz, write_table_npz
from fedprune.data.user import read_npz, write_npz
from fedprune.data.user_images import ImageClients, read_images_npz, write_images_npz
from fedprune.data.user_store import place
from fedprune.data.windows import WindowedDataset
from fedprune.errors import ConfigError, DataError, FedpruneError
from fedprune.methods import Method
from fedprune.models.user import UserModel
from fedprune.runs import names
from fedprune.runs.files import write_json
from fedprune.runs.finished import finished_as_configured
from fedprune.runs.run_dir import check_out_dir, owned_run_dir


@dataclasses.dataclass(frozen=True)
class Workers:
    """Where TFF runs the rounds (:func:`fedprune.workers.execution.install`).

    Parameters
    ----------
    local : int
        Sandboxed local worker processes (``fedprune train --workers``).
    remote : tuple of str
        ``host:port`` of remote workers (``--remote-worker``), over mutual TLS.
    tls : fedprune.workers.execution.RemoteTLS, optional
        The CA, certificate and key for remote workers.
    insecure_remote : bool
        Plain-text remote workers (only on a network you trust).
    remote_timeout : float
        Seconds each remote worker gets to answer.
    unsafe_open : bool
        Local workers without the network sandbox, where it is unavailable.
    """

    local: int = 1
    remote: tuple[str, ...] = ()
    tls: object | None = None
    insecure_remote: bool = False
    remote_timeout: float = 10.0
    unsafe_open: bool = False

    def __post_init__(self) -> None:
        """Refuse what ``fedprune train``'s worker options refuse, before anything starts:
        more local workers than usable CPUs (or fewer than one where no remote worker is
        named), a remote worker that is not ``HOST:PORT``, a timeout that is not a positive
        finite number of seconds."""
        from fedprune.workers.local import check_local_workers

        if isinstance(self.local, bool) or not isinstance(self.local, int):
            raise ConfigError(f"Workers(local={self.local!r}): expected an integer >= 0")
        if self.local or not self.remote:
            try:
                check_local_workers(self.local)
            except ValueError as error:
                raise ConfigError(f"Workers(local={self.local}): {error}") from None
        if isinstance(self.remote, str):
            raise ConfigError(
                f"Workers(remote={self.remote!r}): expected a tuple of HOST:PORT, e.g. "
                f"({self.remote!r},)"
            )
        for target in self.remote:
            try:
                check_host_port(target)
            except ValueError as error:
                raise ConfigError(f"Workers(remote=...): {error}") from None
        timeout = self.remote_timeout
        number = isinstance(timeout, int | float) and not isinstance(timeout, bool)
        if not number or not math.isfinite(timeout) or timeout <= 0:
            raise ConfigError(
                f"Workers(remote_timeout={timeout!r}): must be a positive finite number of "
                "seconds"
            )


@dataclasses.dataclass(frozen=True)
class Trainer:
    """A method ready to run: see the module docstring.

    Attributes
    ----------
    method : fedprune.methods.Method
        The registry entry (name, configuration class, runner).
    config : Config
        The method's configuration, the same class ``fedprune train`` builds from its options.
    data : WindowedDataset or ClientTable, optional
        Your data (:func:`fedprune.data.user.from_arrays` and friends,
        :func:`fedprune.data.tables.from_table`); ``None``: the data ``config.dataset`` names.
    model : UserModel, optional
        Your model; ``None``: the model ``config`` names.
    """

    method: Method
    config: Config
    data: WindowedDataset | ImageClients | ClientTable | None = None
    model: UserModel | None = None
    spelling: str = dataclasses.field(default="command line", repr=False, compare=False)
    """How a :class:`ConfigError` of :meth:`run` names the options: as ``fedprune train``
    does (``--clusters``), or ``"python"``, the builders' keywords (``clusters``,
    :func:`fedprune.configs.fields.in_python_terms`); the builders set ``"python"``."""

    def run(
        self,
        out: str | os.PathLike,
        *,
        data_dir: str | os.PathLike | None = None,
        progress: bool = True,
        workers: Workers | None = Workers(),  # noqa: B008 (frozen, shared safely)
        verbose: bool = False,
    ) -> Result:
        """Train (or resume, or return the finished) run in ``out``.

        Parameters
        ----------
        out : path
            The run directory (made if missing; one process at a time).
        data_dir : path, optional
            Where the built-in datasets are (default: ``$FEDPRUNE_DATA`` or the cache).
        progress : bool
            Progress bars on stderr.
        workers : Workers or None
            The TFF workers to start for this run and stop after it (default: one sandboxed
            local worker, as ``fedprune train``; where the sandbox is unavailable this is
            refused before anything is made, unless ``Workers(unsafe_open=True)``). ``None``
            uses the TFF execution context you installed yourself.
        verbose : bool
            Let TensorFlow's own log lines through (C++ INFO and warning lines, Python
            warnings). By default the run is as quiet as ``fedprune train`` without
            ``--verbose``: fedprune's notes and progress bars only
            (:func:`fedprune.quiet.quiet_run`; where TensorFlow was imported before
            fedprune, its C++ lines are dropped from stderr while the run lasts).
            TensorFlow reads its C++ level once, when first imported: ``verbose=True``
            shows those lines only if this run imports it (or set
            ``TF_CPP_MIN_LOG_LEVEL=0`` before importing fedprune).

        Returns
        -------
        Result
            The finished run: its summary, models, masks and cluster assignments.

        Raises
        ------
        FedpruneError
            One line naming what to fix: a :class:`ConfigError` (an option the data cannot
            meet, a bad ``out``; also :class:`fedprune.workers.execution.RunInProgress` while
            another run of this process trains: TFF's execution context is one per process),
            a :class:`DataError`, a :class:`~fedprune.workers.local.WorkerError`.
        """
        from fedprune.quiet import quiet_run

        try:
            with quiet_run(verbose):
                return self._run(out, data_dir, progress, workers)
        except FedpruneError as err:
            if self.spelling != "python":
                raise
            raise python_error(err, type(self.config)) from None

    def _run(
        self,
        out: str | os.PathLike,
        data_dir: str | os.PathLike | None,
        progress: bool,
        workers: Workers | None,
    ) -> Result:
        check_out_dir(out)
        if (
            self.data is None
            and self.model is None
            and finished_as_configured(self.config, out) is not None
        ):
            return Result(Path(out))  # finished: no workers started, no data loaded
        from fedprune.workers.execution import one_run

        with one_run(out), owned_run_dir(out):  # one run per process, one process per out
            with _placed_data(self.data, Path(out)) as dataset:
                config = self.config
                if dataset is not None:
                    config = dataclasses.replace(config, dataset=str(dataset))
                mine = {} if self.model is None else {"model": self.model}
                with _installed(workers, Path(out)):
                    self.method.run_function()(config, out, data_dir, progress=progress, **mine)
            _draw_curves(Path(out))
        return Result(Path(out))


def _draw_curves(out: Path) -> None:
    """``out/curves.png`` from the run's ``metrics.csv`` (:mod:`fedprune.runs.plot`), where
    the run has rounds to draw and no newer picture."""
    from fedprune.runs.plot import PLOT, plot_runs

    metrics, picture = out / names.METRICS, out / PLOT
    if not metrics.exists():
        return
    if picture.exists() and picture.stat().st_mtime >= metrics.stat().st_mtime:
        return
    plot_runs([out], picture)


@contextmanager
def _placed_data(
    data: WindowedDataset | ImageClients | ClientTable | None, out: Path
) -> Iterator[Path | None]:
    """``out/dataset.npz`` holding ``data`` (placed unless the same data is there already:
    a hard link to the data's one file in the store, :mod:`fedprune.data.user_store`, with
    ``out/dataset.json`` saying so); removed again if the run fails before it started.
    ``None`` when no data was given."""
    if data is None:
        yield None
        return
    write, read = FILES[type(data)]
    path = (out / names.USER_DATASET).resolve()
    started = any((out / name).exists() for name in names.STARTED)
    had = path.exists()
    if had and not _same(read(path), data):
        if started:
            raise DataError(
                f"{out} holds a run trained on other data ({path}); pass that data again, or "
                "choose another out for the new data"
            )
        had = False  # a run that never started: its data file is replaced
    record = out / names.USER_DATASET_RECORD
    if not had:
        write_json(record, {"file": names.USER_DATASET, **place(data, path, write)})
    try:
        yield path
    except BaseException:
        if not had and not any((out / name).exists() for name in names.STARTED):
            path.unlink(missing_ok=True)
            record.unlink(missing_ok=True)
        raise


FILES = {
    WindowedDataset: (write_npz, read_npz),
    ClientTable: (write_table_npz, read_table_npz),
    ImageClients: (write_images_npz, read_images_npz),
}
"""How each kind of your data is written to and read from ``dataset.npz``."""


def _same(a: object, b: object) -> bool:
    """Whether two datasets of the same kind hold the same values (the name aside: the file's
    name is not the one you gave)."""
    if type(a) is not type(b):
        return False
    for field in dataclasses.fields(a):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if field.name == "name":
            continue
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if x is None or y is None or not np.array_equal(x, y):
                return False
        elif x != y:
            return False
    return True


@contextmanager
def _installed(workers: Workers | None, out: Path) -> Iterator[None]:
    """TFF's execution on ``workers`` for the block (logs in ``out/tff-logs``); ``None``:
    the context already installed with :func:`fedprune.workers.execution.install`, refused
    where there is none (TFF's own default would run an unsandboxed worker)."""
    from fedprune.workers import execution

    if workers is None:
        if not execution.installed():
            raise ConfigError(
                "workers=None runs on the TFF workers you started with "
                "fedprune.workers.execution.install(), and none are running; start them, or "
                "leave workers out (one sandboxed local worker)"
            )
        yield
        return

    execution.install(
        num_local_workers=workers.local,
        remote_workers=tuple(workers.remote),
        log_dir=os.path.join(out, names.WORKER_LOGS),
        remote_tls=workers.tls,
        insecure_remote=workers.insecure_remote,
        remote_timeout=workers.remote_timeout,
        unsafe_open_workers=workers.unsafe_open,
    )
    try:
        yield
    finally:
        execution.shutdown()
