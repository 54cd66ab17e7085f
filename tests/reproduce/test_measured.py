"""``experiments/measured/``: the archived record of full-study runs, and the script that
archives it. The archive must match the studies' current grids: a run folder no point of its
study names would be a stale result the docs' tables silently leave out (or resume over)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from fedprune.reproduce import study as S
from fedprune.reproduce.studies import STUDIES, study

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
MEASURED = EXPERIMENTS / "measured"


def _archive_module():
    spec = importlib.util.spec_from_file_location("archive_runs", EXPERIMENTS / "archive_runs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_archive_copies_the_record_of_finished_runs_only(tmp_path):
    out, dest = tmp_path / "out", tmp_path / "dest"
    finished, running = out / "runs" / "a-s0", out / "runs" / "b-s0"
    for run in (finished, running):
        run.mkdir(parents=True)
        (run / "config.json").write_text('{"seed": 0}')
        (run / "metrics.csv").write_text("round\n1\n")
        (run / "checkpoint.npz").write_bytes(b"weights")
    (finished / "summary.json").write_text('{"wall_s": 1.0}')

    assert _archive_module().archive(out, dest) == 1
    copied = dest / "runs" / "a-s0"
    record = ["config.json", "metrics.csv", "summary.json"]
    assert sorted(p.name for p in copied.iterdir()) == record
    assert (copied / "summary.json").read_text() == '{"wall_s": 1.0}'
    assert not (dest / "runs" / "b-s0").exists()


def test_archive_script_refuses_a_missing_out_folder_in_one_line(tmp_path, capsys):
    assert _archive_module().main([str(tmp_path / "missing"), "phases"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--out folder" in err


def _expected_runs(name: str) -> set[str]:
    if name == FEDCREF:  # a Study with a command of its own, not in STUDIES
        from fedprune.reproduce import fedcref

        st = fedcref.STUDY
    else:
        st = study(name)
    seeds = range(st.default_seeds)
    names = set()
    for point in st.points(False):
        for seed in seeds:
            names.add(S.run_dir(Path(), st, point, seed).name)
            if point.again is not None:
                names.add(S.base_dir(Path(), point.again, seed).name)
    return names


ARCHIVED = sorted(p.name for p in MEASURED.iterdir() if p.is_dir()) if MEASURED.exists() else []
TRAIN = "train"  # single `fedprune train` runs, not a study
FEDCREF = "fedcref"  # `fedprune reproduce fedcref`


def test_every_archived_single_run_is_a_finished_run_of_a_registered_method():
    from fedprune.methods import METHODS

    runs = sorted((MEASURED / TRAIN).iterdir())
    assert runs
    for run in runs:
        config = json.loads((run / "config.json").read_text())
        summary = json.loads((run / "summary.json").read_text())
        assert config["method"] in METHODS and summary["method"] == config["method"], run
        assert run.name.endswith(f"-s{config['seed']}") and summary["wall_s"] > 0, run
        rounds = (run / "metrics.csv").read_text().strip().splitlines()[1:]
        assert len(rounds) == config["rounds"] == summary["rounds"], run


@pytest.mark.parametrize("name", [name for name in ARCHIVED if name != TRAIN])
def test_every_archived_run_is_a_finished_run_of_its_studys_current_grid(name):
    assert name in STUDIES or name == FEDCREF, f"experiments/measured/{name}: no such study"
    expected = _expected_runs(name)
    runs = sorted((MEASURED / name / "runs").iterdir())
    assert runs
    for run in runs:
        assert run.name in expected, f"{run}: no point of `reproduce {name}` trains it"
        config = json.loads((run / "config.json").read_text())
        summary = json.loads((run / "summary.json").read_text())
        assert run.name.endswith(f"-s{config['seed']}")
        assert summary["wall_s"] > 0
