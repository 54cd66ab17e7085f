"""--jobs auto: idle cores measured from /proc/stat-like counters decide the runs at a time."""

from __future__ import annotations

import threading

import pytest

from fedprune.reproduce import auto_jobs, runner
from fedprune.reproduce.auto_jobs import AutoJobs, IdleMeter, Slots


def _meter(readings, cores=2):
    it = iter(readings)
    return IdleMeter(cores, read=lambda: next(it))


def test_idle_cores_are_the_idle_share_of_the_window_times_the_cores(tmp_path):
    # 2 cores; 300 of 1000 jiffies idle over the window -> 0.6 of a core
    meter = _meter([(100.0, 1000.0), (400.0, 2000.0), None])
    assert meter.idle_cores() == 2 * 300 / 1000
    assert meter.idle_cores() is None  # unreadable: no decision


def test_cpu_times_reads_idle_and_iowait_of_the_cpu_line(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  10 1 5 80 4 0 0 0 0 0\ncpu0 5 0 2 40 2 0 0 0 0 0\n")
    assert auto_jobs._cpu_times(str(stat)) == (84.0, 100.0)
    assert auto_jobs._cpu_times(str(tmp_path / "missing")) is None


def _auto(readings, clock):
    return AutoJobs(_meter(readings), clock=lambda: clock[0])


def test_a_second_run_is_admitted_only_after_a_window_with_half_a_core_idle():
    clock, said = [0.0], []
    auto = _auto([(0, 0), (100, 1000), (500, 2000)], clock)
    auto.slots.acquire(threading.Event())  # one run training
    clock[0] = auto_jobs.WINDOW_S - 1
    auto.check(said.append)  # the window is not over: nothing read
    assert auto.slots.capacity == 1 and not said
    clock[0] = auto_jobs.WINDOW_S
    auto.check(said.append)  # 0.2 of a core idle: stays at one
    assert auto.slots.capacity == 1
    clock[0] = 2 * auto_jobs.WINDOW_S
    auto.check(said.append)  # 0.8 of a core idle: one more
    assert auto.slots.capacity == 2
    assert said == [
        "--jobs auto: 0.8 of 2 cores stood idle over the last 120 s; training 2 runs at a time"
    ]


def test_slots_never_exceed_the_cores_and_free_slots_block_nothing():
    slots = Slots(1, 2)
    stop = threading.Event()
    assert slots.acquire(stop)
    assert slots.widen() and not slots.widen()
    assert slots.acquire(stop)
    stop.set()
    assert not slots.acquire(stop)  # full and stopping: gives up instead of waiting
    slots.release()
    assert slots.acquire(stop)


def test_run_jobs_auto_trains_every_job(tmp_path):
    jobs = []
    for name in ("a", "b", "c"):
        target = tmp_path / name
        target.mkdir()
        code = f"import pathlib; pathlib.Path({str(target)!r}, 'summary.json').write_text('{{}}')"
        jobs.append(runner.Job(name, (runner.sys.executable, "-c", code), target))
    runner.run_jobs(jobs, parallel="auto")
    assert all((j.target / "summary.json").exists() for j in jobs)


@pytest.mark.parametrize("text, expected", [("auto", "auto"), ("3", 3)])
def test_jobs_option_takes_auto_or_a_count(text, expected):
    from fedprune.cli import build_parser

    args = build_parser().parse_args(["reproduce", "table2", "--jobs", text])
    assert args.jobs == expected


@pytest.mark.parametrize("text", ["0", "two", "-1"])
def test_jobs_option_refuses_anything_else_in_one_line(text, capsys):
    from fedprune.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["reproduce", "table2", "--jobs", text])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith(f"--jobs: expected 'auto' or an integer in [1, 2147483647], got {text!r}")
