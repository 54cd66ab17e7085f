"""``--jobs auto``: how many runs a reproduction trains at a time, measured on this machine.

Whether a second run beside the first pays depends on the machine: a run trains its clients
on all cores, but its setup, evaluation and file writing leave cores idle, and how much
differs between CPUs and TensorFlow builds (one quick Table 2 on a 2-core AVX-512 Xeon kept
1.71 cores busy on average). So ``auto`` measures instead of guessing: the reproduction
starts one run, and every :data:`WINDOW_S` seconds of training it reads the machine's idle
CPU time (``/proc/stat``) over that window. While at least :data:`IDLE_CORES` of a core stood
idle, it admits one more run at a time, up to the number of cores; it never takes a run back.
One line says each decision. Where ``/proc/stat`` cannot be read, it stays at one run.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

WINDOW_S = 120.0
IDLE_CORES = 0.5
AUTO = "auto"


def _cpu_times(path: str = "/proc/stat") -> tuple[float, float] | None:
    """(idle, total) jiffies of all CPUs, or None where the file is unreadable."""
    try:
        with open(path) as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    values = [float(v) for v in fields[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0.0)  # idle + iowait
    return idle, sum(values[:8])


class IdleMeter:
    """Idle cores (0..cores) averaged since the previous reading."""

    def __init__(self, cores: int | None = None, read: Callable = _cpu_times):
        self.cores = cores or os.cpu_count() or 1
        self._read = read
        self._last = read()

    def idle_cores(self) -> float | None:
        now = self._read()
        last, self._last = self._last, now
        if now is None or last is None or now[1] <= last[1]:
            return None
        return self.cores * (now[0] - last[0]) / (now[1] - last[1])


class Slots:
    """How many runs may train at once; :meth:`widen` admits one more (up to ``limit``)."""

    def __init__(self, capacity: int, limit: int):
        self.capacity, self.limit = capacity, max(limit, capacity)
        self._active = 0
        self._changed = threading.Condition()

    def acquire(self, stopping: threading.Event) -> bool:
        """Wait for a free slot; False once ``stopping`` is set."""
        with self._changed:
            while self._active >= self.capacity:
                if stopping.is_set():
                    return False
                self._changed.wait(1.0)
            self._active += 1
            return True

    def release(self) -> None:
        with self._changed:
            self._active -= 1
            self._changed.notify_all()

    @property
    def active(self) -> int:
        return self._active

    def widen(self) -> bool:
        with self._changed:
            if self.capacity >= self.limit:
                return False
            self.capacity += 1
            self._changed.notify_all()
            return True


class AutoJobs:
    """The ``auto`` policy: :meth:`check` is called periodically by the runner."""

    def __init__(self, meter: IdleMeter | None = None, clock: Callable[[], float] = time.monotonic):
        self.meter = meter or IdleMeter()
        self.slots = Slots(1, self.meter.cores)
        self._clock = clock
        self._window_start = clock()

    def check(self, say: Callable[[str], None]) -> None:
        """After each full window with runs training: admit one more run if enough stood idle."""
        if self._clock() - self._window_start < WINDOW_S:
            return
        idle = self.meter.idle_cores()
        self._window_start = self._clock()
        if idle is None or self.slots.active < self.slots.capacity:
            return  # unreadable, or a slot is free anyway (the runs are ending)
        if idle >= IDLE_CORES and self.slots.widen():
            say(
                f"--jobs auto: {idle:.1f} of {self.meter.cores} cores stood idle over the last "
                f"{WINDOW_S:.0f} s; training {self.slots.capacity} runs at a time"
            )
