"""fedprune works as an installed package, from any directory, not only from a clone.

The module builds the wheel from the package's sources (copied away from the clone, so only
what the package declares goes in), installs it with ``--no-deps`` into a fresh virtual
environment outside the clone, and runs the user's first commands there from an empty
folder: ``--help``, a one-round FedAvg, an ``edge-export`` of it, Fed-HIRE on E. coli with
the default (authors') partition, FedCRef's table re-rendered from the archived runs, and a
builder from ``import fedprune as fp``. The fresh environment reuses this environment's
installed stack (TensorFlow, TFF, ...) through a ``.pth`` line, which adds those folders to
``sys.path`` without running their own ``.pth`` files, so this clone's editable install of
fedprune is not seen there (each test checks which fedprune answered).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import har_arrays, write_uci_har

REPO = Path(__file__).resolve().parents[1]
PACKAGE_SOURCES = ("fedprune", "edge_export", "setup.cfg", "pyproject.toml", "README.md")
# files the package reads at run time; each must be in the wheel
PACKAGE_DATA = (
    "fedprune/workers/loopback_bind.c",
    "fedprune/data/fedhire_author_splits.json",
    "fedprune/reproduce/paper_values/table2_paper.csv",
    "fedprune/reproduce/paper_values/fedcref_paper.csv",
    "fedprune/reproduce/paper_values/fedhire_paper.csv",
)
pytestmark = pytest.mark.slow


class Installed:
    """A fresh environment holding the wheel: its interpreter, its folder and a place to work."""

    def __init__(self, root: Path, wheel: Path) -> None:
        self.root, self.wheel = root, wheel
        self.venv = root / "venv"
        self.work = root / "work"
        self.data = root / "data"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["FEDPRUNE_DATA_DIR"] = str(self.data)
        return env

    def run(self, *command: str, timeout: float = 600) -> subprocess.CompletedProcess:
        done = subprocess.run(
            command, cwd=self.work, env=self.env(), capture_output=True, text=True, timeout=timeout
        )
        assert done.returncode == 0, f"{' '.join(command)}: rc {done.returncode}\n{done.stderr}"
        return done


def _copy_sources(to: Path) -> None:
    for name in PACKAGE_SOURCES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, to / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, to / name)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    root = tmp_path_factory.mktemp("wheel")
    sources, dist = root / "sources", root / "dist"
    _copy_sources(sources)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(sources)],
        check=True,
        capture_output=True,
    )
    (wheel,) = dist.glob("fedprune-*.whl")
    box = Installed(root, wheel)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(box.venv)], check=True)
    target = box.venv / "bin" / "python"
    subprocess.run([*pip, "--python", str(target), "install", "--no-deps", str(wheel)], check=True)
    site = subprocess.run(
        [str(target), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    stack = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site) / "pinned_stack.pth").write_text("\n".join(sorted(stack)) + "\n")
    box.work.mkdir()
    (box.data / "uci_har").mkdir(parents=True)
    write_uci_har(box.data / "uci_har", *har_arrays(6, subjects=(1, 2, 3, 4)), as_zip=True)
    return box


def test_the_wheel_holds_every_file_the_package_reads(installed):
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    assert set(PACKAGE_DATA) <= names, sorted(set(PACKAGE_DATA) - names)
    assert not any(name.startswith(("tests/", "experiments/")) for name in names)


def test_fedprune_answers_from_the_installed_package(installed):
    where = installed.run(
        str(installed.venv / "bin" / "python"),
        "-c",
        "import fedprune, edge_export; print(fedprune.__file__); print(edge_export.__file__)",
    ).stdout.split()
    assert all(Path(path).is_relative_to(installed.venv) for path in where), where
    assert "usage: fedprune" in installed.run("fedprune", "--help").stdout


def test_a_fedavg_round_and_its_export(installed):
    args = ["--rounds", "1", "--clients-per-round", "2", "--local-epochs", "1", "--no-progress"]
    installed.run("fedprune", "train", "fedavg", "--dataset", "uci_har", *args, "--out", "r1")
    assert (installed.work / "r1" / "summary.json").is_file()
    installed.run("edge-export", "r1", "--clients", "1", "--formats", "float32", "--out", "e1")
    assert (installed.work / "e1" / "client1" / "float32.tflite").is_file()
    assert (installed.work / "e1" / "export_report.json").is_file()


def test_fedhire_with_the_authors_partition(installed, real_data):
    """The default partition of Fed-HIRE on E. coli reads the authors' splits (package data)."""
    env_data = ["--data-dir", str(real_data)]
    installed.run("fedprune", "train", "fedhire", "--dataset", "ecoli", *env_data, "--seed", "0",
                  "--out", "fh", "--no-progress")  # fmt: skip
    assert (installed.work / "fh" / "summary.json").is_file()


def test_the_archived_fedcref_table_renders_with_the_papers_values(installed):
    runs = installed.work / "fedcref"
    shutil.copytree(REPO / "experiments" / "measured" / "fedcref", runs)
    installed.run("fedprune", "reproduce", "fedcref", "--out", str(runs))
    table = (runs / "fedcref_table.md").read_text()
    assert "0.879" in table  # the paper's MNIST d = 0.3 ACC, from the package's paper values


def test_a_builder_from_python(installed):
    code = (
        "import numpy as np, fedprune as fp\n"
        "x = np.random.default_rng(0).normal(size=(60, 16, 3)).astype('float32')\n"
        "data = fp.from_arrays(x, np.tile([0, 1, 2], 20), np.repeat([1, 2, 3], 20))\n"
        "trainer = fp.fedavg(data, rounds=1)\n"
        "print(type(trainer).__name__, trainer.config.rounds)\n"
    )
    out = installed.run(str(installed.venv / "bin" / "python"), "-c", code).stdout.split()
    assert out == ["Trainer", "1"]


def test_every_study_reads_the_papers_values_from_the_package(installed):
    code = (
        "from fedprune.reproduce import studies, table2, study\n"
        "print(len(table2.paper_values()))\n"
        "for name in studies.STUDIES:\n"
        "    s = studies.study(name)\n"
        "    if s.from_paper:\n"
        "        print(s.name, len(study.read_paper(s.paper_csv)))\n"
    )
    out = installed.run(str(installed.venv / "bin" / "python"), "-c", code).stdout.splitlines()
    assert int(out[0]) > 0
    assert out[1:] and all(int(line.split()[1]) > 0 for line in out[1:]), out
