"""No test bounds a wall time that a loaded machine can break.

Every line of the suite that subtracts two clock readings is listed here with why it is
allowed: it bounds nothing (a print, a CPU-time sum), or its bound is at least 10x the time
the step takes on an idle machine and says so beside it. A new timing line fails this test
until it is listed with its reason; speed targets belong in ``make bench``.
"""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
CLOCK = re.compile(r"\b(monotonic|time|perf_counter|process_time)\(\) - ")

# (file, the line's text without indentation) -> why it is allowed
ALLOWED = {
    (
        "reproduce/test_runner.py",
        "assert time.monotonic() - t0 < 300",
    ): "200x its idle 1.5 s; only a child that ran its own 600 s reaches it",
    (
        "models/test_table.py",
        "\"print(time.perf_counter() - t, 'tensorflow' in sys.modules, 'numpy' in sys.modules)\"",
    ): "2 s bound, 200x the idle 9 ms, a tenth of importing TensorFlow",
    (
        "edge_export/test_micro_project.py",
        "first_seconds = time.perf_counter() - start",
    ): "printed only",
    (
        "edge_export/test_micro_project.py",
        'print(f"\\nhost build: first {first_seconds:.0f} s, cached {time.perf_counter() - start:.0f} s")',  # noqa: E501
    ): "printed only",
    (
        "workers/test_worker_security.py",
        "assert time.monotonic() - start < 60",
    ): "6,000x the idle refused connection; half the 120 s timeout it must not wait for",
    (
        "workers/test_worker_security.py",
        "assert 1.0 <= time.monotonic() - start < 60",
    ): "60x the 1 s timeout it waits for; without the timeout it would hang forever",
    (
        "workers/test_worker_security.py",
        "assert time.monotonic() - start < 120",
    ): "over 100x the idle refusal; half the 240 s timeout it must not wait for",
    (
        "algorithms/fedhire/test_algorithm.py",
        "total = time.process_time() - start",
    ): "CPU time, which load does not inflate, as an upper bound of the parts it sums",
    (
        "algorithms/test_fedcref_interrupts.py",
        "took = time.monotonic() - sent",
    ): "EXIT_WITHIN_S = 10 s, over 10x the idle exit after SIGINT",
    (
        "algorithms/test_fedcref_interrupts.py",
        "life = time.monotonic() - began",
    ): "the range of a random interrupt time; bounds nothing",
}


def timing_lines() -> set[tuple[str, str]]:
    """(file relative to tests/, stripped line) of every clock subtraction in the suite."""
    found = set()
    for path in TESTS.rglob("*.py"):
        if path.name == Path(__file__).name:
            continue
        for line in path.read_text().splitlines():
            if CLOCK.search(line):
                found.add((path.relative_to(TESTS).as_posix(), line.strip()))
    return found


def test_every_clock_subtraction_in_the_suite_is_listed_with_its_reason():
    unlisted = sorted(timing_lines() - ALLOWED.keys())
    assert not unlisted, f"timing lines without a reason in ALLOWED: {unlisted}"


def test_no_listed_line_is_stale():
    assert not sorted(ALLOWED.keys() - timing_lines())


def test_the_scan_finds_a_bound():
    assert CLOCK.search("assert time.monotonic() - started < 3.0")
    assert CLOCK.search("x = time() - t0")
    assert not CLOCK.search("deadline = time.monotonic() + 5")
