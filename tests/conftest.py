"""Shared fixtures: tiny datasets written in the official file formats, and real-data lookup."""

from __future__ import annotations

import os
import struct
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from fedprune.data import uci_har, wisdm


def real_data_dir() -> Path | None:
    """$FEDPRUNE_DATA_DIR, else ../shared/data next to the repository, if it exists."""
    env = os.environ.get("FEDPRUNE_DATA_DIR")
    for candidate in (env, Path(__file__).resolve().parents[2] / "shared" / "data"):
        if candidate and (Path(candidate) / "uci_har").is_dir():
            return Path(candidate)
    return None


@pytest.fixture
def real_data() -> Path:
    path = real_data_dir()
    if path is None:
        pytest.skip("real datasets not found (set FEDPRUNE_DATA_DIR)")
    return path


@pytest.fixture(scope="module")
def tff_context():
    """TFF workers for a test module, stopped afterwards."""
    from fedprune.workers import execution

    execution.install()
    yield
    execution.shutdown()


def interrupted(monkeypatch, run: Callable[[], object], after_round: int) -> None:
    """Run ``run`` as if killed right after the checkpoint of ``after_round`` was written."""
    from fedprune.runs import RunDir

    original = RunDir.save_checkpoint

    def crash(self, round_num, *args, **kwargs):
        original(self, round_num, *args, **kwargs)
        if round_num == after_round:
            raise KeyboardInterrupt

    monkeypatch.setattr(RunDir, "save_checkpoint", crash)
    with pytest.raises(KeyboardInterrupt):
        run()
    monkeypatch.setattr(RunDir, "save_checkpoint", original)


@pytest.fixture(autouse=True)
def _isolated_cache(request, tmp_path_factory, monkeypatch):
    """Fixture datasets get a per-test cache; real-data tests share one per session."""
    if "real_data" in request.keywords:
        path = tmp_path_factory.getbasetemp() / "real-cache"
    else:
        path = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("FEDPRUNE_CACHE_DIR", str(path))


def har_arrays(windows_per_class: int = 3, subjects=(1, 2, 3), seed: int = 0):
    """Synthetic UCI-HAR-shaped arrays: every subject has every class."""
    rng = np.random.default_rng(seed)
    rows = [(s, c) for s in subjects for c in range(1, 7) for _ in range(windows_per_class)]
    subject = np.array([r[0] for r in rows])
    y = np.array([r[1] for r in rows])
    # class-dependent signal so a model can learn it
    x = rng.normal(0, 0.1, size=(len(rows), uci_har.WINDOW, 9)).astype(np.float32)
    x += (y[:, None, None] / 6.0).astype(np.float32)
    return x, y, subject


def write_uci_har(root: Path, x, y, subject, as_zip: bool = False) -> Path:
    """Write the official layout (``UCI HAR Dataset/{train,test}/...``); half train, half test."""
    n = len(y)
    split = {"train": slice(0, n // 2), "test": slice(n // 2, n)}
    files = {}
    for name, sl in split.items():
        files[f"{name}/y_{name}.txt"] = "".join(f"{v}\n" for v in y[sl])
        files[f"{name}/subject_{name}.txt"] = "".join(f"{v}\n" for v in subject[sl])
        for ch, signal in enumerate(uci_har.SIGNALS):
            lines = (
                "".join(f"{v:16.7e}" for v in row) + "\r\n" for row in x[sl, :, ch].astype(float)
            )
            files[f"{name}/Inertial Signals/{signal}_{name}.txt"] = "".join(lines)
    if as_zip:
        path = root / "UCI HAR Dataset.zip"
        with zipfile.ZipFile(path, "w") as zf:
            for rel, text in files.items():
                zf.writestr(f"{uci_har.ROOT}/{rel}", text)
        return path
    base = root / uci_har.ROOT
    for rel, text in files.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(text)
    return base


WISDM_TEXT = (
    # user 1 walking: 5 rows, then jogging 3 rows; user 2 sitting 4 rows
    "1,Walking,100,0.1,0.2,0.3;\n"
    "1,Walking,101,0.2,0.3,0.4;\n"
    "1,Walking,102,0.3,0.4,0.5;1,Walking,103,0.4,0.5,0.6;\n"  # two records on one line
    "1,Walking,104,0.5,0.6,0.7;\n"
    "1,Walking,105,0.6,0.7,;\n"  # malformed: empty z
    "1,Jogging,106,1.0,1.1,1.2;\n"
    "1,Jogging,107,1.1,1.2,1.3;\n"
    "1,Jogging,108,1.2,1.3,1.4;\n"
    "\n"
    "2,Sitting,109,2.0,2.1,2.2;\n"
    "2,Sitting,110,2.1,2.2,2.3;\n"
    "2,Flying,111,2.1,2.2,2.3;\n"  # malformed: unknown activity
    "2,Sitting,112,2.2,2.3,2.4;\n"
    "2,Sitting,113,2.3,2.4\n"  # malformed: 5 fields
    "2,Sitting,114,2.4,2.5,2.6;\n"
)


def wisdm_text(users=(1, 2, 3), rows_per_activity: int = 300, seed: int = 0) -> str:
    """WISDM raw lines: each user does every activity for ``rows_per_activity`` rows, with
    the official file's kinds of malformed lines mixed in (three per user)."""
    rng = np.random.default_rng(seed)
    lines = []
    for user in users:
        for k, activity in enumerate(wisdm.CLASS_NAMES):
            for i in range(rows_per_activity):
                x, y, z = rng.normal(k, 1.0, size=3)
                lines.append(f"{user},{activity},{i},{x:.6f},{y:.6f},{z:.6f};")
        lines += [f"{user},Walking,1,0.5,0.5,;", f"{user},Walking,1", ""]
    return "\n".join(lines) + "\n"


@pytest.fixture
def uci_har_zip(tmp_path) -> Path:
    return write_uci_har(tmp_path, *har_arrays(), as_zip=True)


def write_fixture_data(root: Path) -> Path:
    """``root`` as a data dir with a small UCI-HAR zip (6 subjects, 6 windows per class) and a
    WISDM raw file (3 users, 6 malformed lines)."""
    (root / "uci_har").mkdir()
    write_uci_har(root / "uci_har", *har_arrays(6, subjects=tuple(range(1, 7))), as_zip=True)
    (root / "wisdm").mkdir()
    (root / "wisdm" / wisdm.RAW_NAME).write_text(wisdm_text())
    return root


@pytest.fixture
def fixture_data_dir(tmp_path) -> Path:
    """:func:`write_fixture_data` in the test's own folder."""
    return write_fixture_data(tmp_path)


@pytest.fixture(scope="module")
def module_data_dir(tmp_path_factory) -> Path:
    """:func:`write_fixture_data` once for a test module, for module fixtures (a run several
    tests read): the tests must only read it."""
    return write_fixture_data(tmp_path_factory.mktemp("data"))


def damage_zip_member(path: Path, member: str) -> None:
    """Flip one byte in the middle of ``member``'s stored data in the zip ``path``, so that
    reading it fails its CRC-32 check (or its decompression) while the archive still opens."""
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(member)
    raw = bytearray(path.read_bytes())
    start = info.header_offset
    name_len, extra_len = struct.unpack("<HH", raw[start + 26 : start + 30])
    raw[start + 30 + name_len + extra_len + info.compress_size // 2] ^= 0xFF
    path.write_bytes(bytes(raw))


@pytest.fixture
def wisdm_data_dir(tmp_path) -> Path:
    """A data dir with only the WISDM raw file of :func:`fixture_data_dir` (cheaper to build)."""
    (tmp_path / "wisdm").mkdir()
    (tmp_path / "wisdm" / wisdm.RAW_NAME).write_text(wisdm_text())
    return tmp_path


@pytest.fixture
def small_disk(tmp_path) -> Iterator[Callable[[int], Path]]:
    """``small_disk(kib)``: a new folder on its own tmpfs of ``kib`` KiB, so that writing
    more fills a real disk (ENOSPC from the kernel, not an injected error); unmounted after
    the test. Mounting needs root: skips, saying so, for other users or where the kernel
    refuses it."""
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs (a real full disk) needs root")
    mounted: list[Path] = []

    def make(kib: int) -> Path:
        folder = tmp_path / f"disk{len(mounted)}"
        folder.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(folder)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
        mounted.append(folder)
        return folder

    yield make
    for folder in mounted:
        subprocess.run(["umount", "-l", str(folder)], check=True)


# Test files of a minute or more on the 2-core CI machine, heaviest first (measured with
# `pytest --durations`). `make test` runs the suite with pytest-xdist's `--dist loadfile`: each
# file goes whole to one process, and xdist hands them out in order of their number of tests,
# so a file of a few long tests came last and kept one process busy long after the other was
# done. These go first instead; the many short files then fill in behind them, and the two
# processes finish together. A file missing here only runs later; a renamed one, the same.
HEAVIEST_FILES = (
    "tests/edge_export/test_cortex_m.py",  # cold TFLM libraries for the host and a Cortex-M4
    "tests/test_interrupt.py",  # fedprune processes: interrupted, resumed and straight runs
    "tests/algorithms/caafp/test_caafp.py",
    "tests/edge_export/test_export.py",  # the every-format export (shared with others)
    "tests/algorithms/caafp/test_recluster.py",
    "tests/edge_export/test_micro_project.py",
    "tests/edge_export/test_qat.py",
    "tests/edge_export/test_micro_float_head.py",
)


@pytest.hookimpl(optionalhook=True)  # xdist's hook: plain `pytest` runs without xdist too
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` with :data:`HEAVIEST_FILES` handed out first (then xdist's order)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class HeaviestFirst(LoadFileScheduling):
        ordered = False

        def _assign_work_unit(self, node):
            if not self.ordered:  # the queue is complete before the first file is handed out
                rank = {name: i for i, name in enumerate(HEAVIEST_FILES)}
                queue = sorted(self.workqueue.items(), key=lambda kv: rank.get(kv[0], len(rank)))
                self.workqueue.clear()
                self.workqueue.update(queue)
                self.ordered = True
            super()._assign_work_unit(node)

    return HeaviestFirst(config, log)
