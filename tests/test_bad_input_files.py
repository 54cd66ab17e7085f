"""Bad output paths and run files that fedprune must not trust, given to ``fedprune`` and
``edge-export``: every case exits 2 with exactly one ``error:`` line naming what to fix, no
traceback, and leaves the working folder exactly as it was (nothing made, nothing changed).

One table: each case is (program, how to prepare it, the command line, a fragment of the
error). The runs are written by hand (an untrained HAR CNN checkpoint, no training), and
every case fails before the data is read, so no data directory is needed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from edge_export.cli import main as edge_export
from fedprune.cli import main as fedprune
from fedprune.runs import RunDir
from tests.edge_export.test_bad_input import _fedavg, har_weights

__all__ = ["har_weights"]  # the fixture, used by name

Prepare = Callable[[Path, list], None]


def _run(work: Path, weights: list) -> None:
    """A finished FedAvg run TMP/run with one round of metrics."""
    _fedavg(work / "run", weights)
    RunDir(work / "run", json.loads((work / "run" / "config.json").read_text())).append_metrics(
        {"round": 1, "acc": 0.5, "loss": 1.2}
    )


def _with(*steps: Callable[[Path], None]) -> Prepare:
    """The run, then ``steps`` on the working folder."""

    def prepare(work: Path, weights: list) -> None:
        _run(work, weights)
        for step in steps:
            step(work)

    return prepare


def _file(name: str, text: str = "not yours\n") -> Callable[[Path], None]:
    def step(work: Path) -> None:
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)

    return step


def _link(name: str, target: str) -> Callable[[Path], None]:
    def step(work: Path) -> None:
        (work / name).symlink_to(work / target)

    return step


def _earlier_export(work: Path) -> None:
    """TMP/export holding another run's export (its report and one client's files)."""
    (work / "export" / "client2").mkdir(parents=True)
    (work / "export" / "client2" / "float32.tflite").write_bytes(b"TFL3 another run's model")
    (work / "export" / "export_report.json").write_text('[{"client": 2}]\n')


def _json_with(name: str, key: str, constant: str) -> Callable[[Path], None]:
    """``run/name`` with ``key`` set to the non-JSON ``constant`` Python's json writes."""

    def step(work: Path) -> None:
        path = work / "run" / name
        value = {**json.loads(path.read_text()), key: "<constant>"}
        path.write_text(json.dumps(value).replace('"<constant>"', constant) + "\n")

    return step


def _caafp_config(work: Path) -> None:
    """TMP/run's config.json made a CA-AFP run's, so ``fedprune finetune`` takes it."""
    from fedprune.configs.pipeline import CAAFPConfig

    config = dataclasses.asdict(CAAFPConfig("uci_har", split="time-ordered", standardize=False))
    (work / "run" / "config.json").write_text(json.dumps(config))


EXPORT = ["TMP/run", "--no-progress"]
PLOT = ["plot", "TMP/run"]
FINETUNE = ["finetune", "TMP/run", "--ft-epochs", "1", "--no-progress", "--out", "TMP/ft"]

# name: (program, prepare, argv (TMP: the working folder), fragment of the error line)
CASES: dict[str, tuple[str, Prepare, list[str], str]] = {
    # edge-export --clients naming a client twice would export and count it twice
    "edge-export --clients 1,1": (
        "edge-export",
        _with(),
        EXPORT + ["--clients", "1,1", "--out", "TMP/export"],
        "--clients names client 1 more than once ('1,1'); list each client once",
    ),
    "edge-export --clients 2,1,2,1": (
        "edge-export",
        _with(),
        EXPORT + ["--clients", "2,1,2,1", "--out", "TMP/export"],
        "--clients names client 1, 2 more than once",
    ),
    # --out holding another run's export, or files that are no export
    "edge-export --out holds an export": (
        "edge-export",
        _with(_earlier_export),
        EXPORT + ["--out", "TMP/export"],
        "already holds an export (client2, export_report.json); pass --overwrite to replace it",
    ),
    "edge-export --out holds other files": (
        "edge-export",
        _with(_file("export/notes.txt")),
        EXPORT + ["--out", "TMP/export"],
        "already holds files that are not an export (notes.txt; no export_report.json)",
    ),
    "edge-export --overwrite of files that are no export": (
        "edge-export",
        _with(_file("export/notes.txt")),
        EXPORT + ["--out", "TMP/export", "--overwrite"],
        "already holds files that are not an export (notes.txt; no export_report.json)",
    ),
    # a dangling link as --out is named as one, not "a file"
    "edge-export --out a dangling link": (
        "edge-export",
        _with(_link("export", "nowhere")),
        EXPORT + ["--out", "TMP/export"],
        "--out TMP/export: TMP/export is a symbolic link to 'TMP/nowhere', which does not exist",
    ),
    "edge-export --out under a dangling link": (
        "edge-export",
        _with(_link("link", "nowhere")),
        EXPORT + ["--out", "TMP/link/export"],
        "TMP/link is a symbolic link to 'TMP/nowhere', which does not exist",
    ),
    # NaN / Infinity are not JSON: a run file holding them is damaged
    "edge-export summary.json avg_acc NaN": (
        "edge-export",
        _with(_json_with("summary.json", "avg_acc", "NaN")),
        EXPORT + ["--out", "TMP/export"],
        "summary.json is damaged (holds NaN, which is not JSON)",
    ),
    "edge-export summary.json Infinity": (
        "edge-export",
        _with(_json_with("summary.json", "avg_acc", "Infinity")),
        EXPORT + ["--out", "TMP/export"],
        "summary.json is damaged (holds Infinity, which is not JSON)",
    ),
    "edge-export config.json -Infinity": (
        "edge-export",
        _with(_json_with("config.json", "lr", "-Infinity")),
        EXPORT + ["--out", "TMP/export"],
        "config.json is damaged (holds -Infinity, which is not JSON)",
    ),
    "finetune summary.json NaN": (
        "fedprune",
        _with(_caafp_config, _json_with("summary.json", "avg_acc", "NaN")),
        FINETUNE,
        "summary.json is damaged (holds NaN, which is not JSON)",
    ),
    # fedprune plot --out: a path through a file, a name that is no picture, dangling links
    "plot --out through a file": (
        "fedprune",
        _with(),
        PLOT + ["--out", "TMP/run/config.json/x.png"],
        "--out TMP/run/config.json/x.png: TMP/run/config.json is a file, so the folder cannot "
        "be made",
    ),
    "plot --out neither .png nor a folder": (
        "fedprune",
        _with(),
        PLOT + ["--out", "TMP/pictures"],
        "--out TMP/pictures: give a .png file name or an existing folder",
    ),
    "plot --out a dangling link": (
        "fedprune",
        _with(_link("curves.png", "gone/curves.png")),
        PLOT + ["--out", "TMP/curves.png"],
        "--out TMP/curves.png is a symbolic link to 'TMP/gone/curves.png', which does not exist",
    ),
    "plot --out under a dangling link": (
        "fedprune",
        _with(_link("pictures", "gone")),
        PLOT + ["--out", "TMP/pictures/x.png"],
        "TMP/pictures is a symbolic link to 'TMP/gone', which does not exist",
    ),
}


def _snapshot(root: Path) -> dict[str, str]:
    """Every entry under ``root``: a file's hash, a link's target, "" for a folder."""
    entries = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            entries[str(path.relative_to(root))] = f"-> {path.readlink()}"
        elif path.is_file():
            entries[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            entries[str(path.relative_to(root))] = ""
    return entries


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_error_line_and_leaves_nothing(case, tmp_path, har_weights, capsys):
    program, prepare, argv, fragment = CASES[case]
    work = tmp_path / "work"
    work.mkdir()
    prepare(work, har_weights)
    args = [a.replace("TMP", str(work)) for a in argv]
    before = _snapshot(work)
    capsys.readouterr()
    try:
        rc = (edge_export if program == "edge-export" else fedprune)(args)
    except SystemExit as exit_:  # argparse's own errors
        rc = exit_.code
    captured = capsys.readouterr()
    assert rc == 2, captured.err
    errors = [line for line in captured.err.splitlines() if "error:" in line]
    assert len(errors) == 1, captured.err
    assert errors[0].startswith(f"{program}: error: "), captured.err
    assert fragment.replace("TMP", str(work)) in errors[0], captured.err
    assert "Traceback" not in captured.err
    assert _snapshot(work) == before  # nothing made, nothing changed


# --- the corresponding successes ------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["folder", "folder/"])
def test_plot_into_a_folder_writes_curves_png_there(spelling, tmp_path, har_weights, capsys):
    _run(tmp_path, har_weights)
    (tmp_path / "folder").mkdir(exist_ok=spelling == "folder/")
    if spelling == "folder/":
        (tmp_path / "folder").rmdir()  # a trailing slash: made as a folder
    out = f"{tmp_path}/{spelling}"  # as typed: Path would drop the slash
    assert fedprune(PLOT[:1] + [str(tmp_path / "run"), "--out", out]) == 0
    picture = tmp_path / "folder" / "curves.png"
    assert capsys.readouterr().out == f"{picture}\n"
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (tmp_path / "folder.png").exists()
    assert [p.name for p in (tmp_path / "folder").iterdir()] == ["curves.png"]


def test_summary_with_nan_is_never_written(tmp_path):
    from fedprune.errors import DataError

    run = RunDir(tmp_path / "run", {"method": "fedavg"})
    with pytest.raises(DataError, match="'avg_acc' \\(nan\\) is not a finite number"):
        run.write_summary({"method": "fedavg", "avg_acc": float(np.float32("nan"))})
    assert not run.finished
