"""One process per output folder: an OS lock on a file in it.

Two commands writing one run directory lose data: both append every round to one
``metrics.csv``, or the one that is refused cleans up files the other is using. So every
command that writes a folder (``fedprune train``, ``fedprune finetune``, each run of
``fedprune reproduce`` and the study's report, ``fedprune-export``'s output) first takes
:class:`FolderLock` on it:

* the lock is ``flock(2)`` on ``<folder>/.fedprune.lock`` (the file holds the owner's pid);
  the kernel releases it when the process ends in any way, so a crashed run leaves at most a
  stale file that the next command simply takes over;
* a second process is refused with :class:`FolderInUse` (one line naming the holder's pid)
  *before* it reads, writes or deletes anything in the folder;
* the folders the lock had to create, and the lock file, are removed when it is released,
  so a command refused later (bad input found after the lock) leaves nothing it made.

The lock is advisory and local: it holds between fedprune processes on one machine (and on
network file systems whose ``flock`` is cluster-wide, such as NFSv4). Reading a run (its
summary, metrics or files) takes no lock.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path
from types import TracebackType

from fedprune.errors import ConfigError

LOCK_FILE = ".fedprune.lock"


class FolderInUse(ConfigError):
    """Another process holds the folder's lock; the message names its pid."""


class FolderLock:
    """``with FolderLock(path, option="--out"):`` the folder is this process's until the block
    ends. ``name`` picks the lock file (one folder can hold several independently locked
    things, e.g. the reports of two studies in one ``--out``). ``mode``: of ``path`` where
    the lock has to make it (0700 for a run directory, which holds a copy of the user's data;
    missing folders above it get the usual mode)."""

    def __init__(
        self,
        path: str | os.PathLike,
        option: str = "--out",
        name: str = LOCK_FILE,
        mode: int = 0o777,
    ):
        self.path = Path(path)
        self.option = option
        self.file = self.path / name
        self.mode = mode
        self._fd: int | None = None
        self._made: list[Path] = []

    # --- taking and releasing ------------------------------------------------------------
    def acquire(self) -> None:
        self._made = _make_folders(self.path, self.mode)
        try:
            self._fd = self._take()
        except BaseException:
            self._remove_made_folders()
            raise

    def _take(self) -> int:
        """The locked file's descriptor. A holder that releases while we open removes the
        file, so a descriptor locked on a file no longer in the folder is retried."""
        for _ in range(100):
            fd = os.open(self.file, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                holder = _read_pid(fd)
                os.close(fd)
                if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                raise FolderInUse(self._in_use(holder)) from None
            try:
                same = os.stat(self.file, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
                return fd
            os.close(fd)
        raise FolderInUse(self._in_use(None))

    def _in_use(self, holder: int | None) -> str:
        who = f"fedprune process {holder}" if holder else "another fedprune process"
        return (
            f"{self.option} {self.path} is in use by {who}; wait for it to end (or stop it), "
            f"or choose another {self.option}"
        )

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            self.file.unlink(missing_ok=True)  # while still locked: no one else holds it
        finally:
            os.close(self._fd)
            self._fd = None
            self._remove_made_folders()

    def _remove_made_folders(self) -> None:
        """The folders :meth:`acquire` created, deepest first, where nothing was put in them."""
        for folder in reversed(self._made):
            try:
                folder.rmdir()
            except OSError:  # not empty (the run wrote files), or gone already
                break
        self._made = []

    def __enter__(self) -> FolderLock:
        self.acquire()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.release()


def holder(path: str | os.PathLike, name: str = LOCK_FILE) -> int | None:
    """The pid of the process that holds ``path``'s lock (0 if it has not written it yet), or
    ``None`` when no one does; creates nothing."""
    file = Path(path) / name
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return _read_pid(fd) or 0  # held, its pid not yet written
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _make_folders(path: Path, mode: int = 0o777) -> list[Path]:
    """Create ``path`` (with ``mode``, less the umask) and its missing parents; returns those
    this call created, top first (a folder another process made meanwhile is not ours)."""
    missing = []
    current = path
    while not current.exists() and not current.is_symlink():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    made = []
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=mode if folder == path else 0o777)
        except FileExistsError:
            continue
        made.append(folder)
    return made
