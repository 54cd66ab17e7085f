"""The FedCRef reproduction, a Study: its table, page, plot and commands, from fake finished
runs."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from fedprune.reproduce import fedcref as F
from fedprune.reproduce import study as S


def _point(dataset: str, d: float) -> S.Point:
    return next(
        p for p in F.points(False) if p.labels == (("dataset", dataset), ("dirtiness", str(d)))
    )


def _fake(out, dataset, d, seed, acc, wall_s=100.0):
    path = S.run_dir(out, F.STUDY, _point(dataset, d), seed)
    path.mkdir(parents=True)
    summary = {
        "acc_init": 1 - d, "acc_final": acc, "communities": 10, "true_categories": 10,
        "wrong_assoc_pct": 2.0, "clusters_total": 87, "isolated_start": 60, "isolated_end": 15,
        "iterations": 4, "wall_s": wall_s,
    }  # fmt: skip
    (path / "config.json").write_text(json.dumps({"seed": seed}))
    (path / "summary.json").write_text(json.dumps(summary))
    (path / "metrics.csv").write_text(
        "iteration,acc,communities,wrong_assoc_pct,isolated,active_clients\n"
        "1,0.8,8,1.0,60,25\n2,0.85,10,2.0,15,3\n"
    )


def _table(out, seeds):
    rows = S.join_paper(F.STUDY, S.collect(F.STUDY, F.points(False), seeds, out))
    return [F.publish(r) for r in rows]


def test_runs_keep_their_archived_names():
    names = [S.run_dir(Path("o"), F.STUDY, p, 4).name for p in F.points(False)]
    assert names[:2] == ["fedcref-mnist-d0.0-s4", "fedcref-mnist-d0.3-s4"]
    assert len(set(names)) == len(F.SETTINGS) * len(F.DIRTINESS)


def test_table_page_and_plot(tmp_path):
    for setting in F.SETTINGS:
        for d in F.DIRTINESS:
            _fake(tmp_path, setting.dataset, d, 0, 0.88, wall_s=100.0)
            _fake(tmp_path, setting.dataset, d, 1, 0.86, wall_s=300.0)
    text = F.reproduce(str(tmp_path), seeds=2)
    table = _table(tmp_path, [0, 1])
    row = next(r for r in table if r["dataset"] == "mnist" and r["dirtiness"] == "0.3")
    assert row["seeds"] == 2 and row["acc_final"] == pytest.approx(0.87)
    assert row["paper_acc_final"] == pytest.approx(0.879)  # paper_values/fedcref_paper.csv
    assert row["paper_dataset"] == "EMNIST" and row["wall_s"] == pytest.approx(200.0)
    assert row["acc_final_ci"] == pytest.approx(0.127062, rel=1e-4)
    assert row["paper_acc_final_ci"] == 0.028 and row["acc_final_vs_paper"] == "in"
    assert row["communities_vs_paper"] == "in" and row["wrong_assoc_pct_vs_paper"] == "below"
    assert "| mnist (EMNIST) | 0.3 | 2 | 0.700 | 0.870 ± 0.127 (0.879 ± 0.028) in |" in text
    assert text.endswith("\nwall time of this invocation: 0 s\n")
    with open(tmp_path / "fedcref_table.csv") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == F.COLUMNS and len(rows) == 9
    assert rows[1]["dirtiness"] == "0.3" and rows[1]["wall_s"] == "200.0"
    assert (tmp_path / F.FIGURE).stat().st_size > 10_000
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == [
        "fedcref_iterations.png",
        "fedcref_table.csv",
        "fedcref_table.md",
    ]


def test_one_seed_has_no_interval_and_a_zero_std(tmp_path):
    _fake(tmp_path, "mnist", 0.3, 0, 0.88)
    (row,) = [
        F.publish(r)
        for r in S.join_paper(F.STUDY, S.collect(F.STUDY, [_point("mnist", 0.3)], [0], tmp_path))
    ]
    assert row["acc_final_ci"] is None and row["acc_final_std"] == 0.0
    assert row["acc_final_vs_paper"] == "in"  # 0.880 inside 0.879 ± 0.028


def test_plotted_acc_starts_at_the_initial_clustering(tmp_path):
    _fake(tmp_path, "mnist", 0.3, 0, 0.88)
    series = F.iteration_series(S.run_dir(tmp_path, F.STUDY, _point("mnist", 0.3), 0))
    assert series["acc"] == ([0, 1, 2], [pytest.approx(0.7), 0.8, 0.85])
    assert series["communities"] == ([1, 2], [8.0, 10.0])


def test_jobs_carry_dataset_options(tmp_path):
    bases, jobs = S.jobs(F.STUDY, F.points(False), [0], tmp_path, "/data")
    assert not bases and len(jobs) == 9
    kmnist = [j for j in jobs if "kmnist" in j.label]
    assert all("--split" in j.command and "test" in j.command for j in kmnist)
    fashion = [j for j in jobs if "fashion" in j.label][0].command
    assert fashion[fashion.index("--theta") + 1] == "0.15"
    assert all(j.command[j.command.index("--data-dir") + 1] == "/data" for j in jobs)


def test_progress_lines_name_the_iteration(tmp_path, capsys):
    run = tmp_path / "fedcref-mnist-d0.3-s0"
    run.mkdir()
    (run / "metrics.csv").write_text("iteration,acc\n1,0.8\n2,0.85\n")
    S.runner.report_progress([run])
    assert "fedcref-mnist-d0.3-s0: iteration 2" in capsys.readouterr().err
