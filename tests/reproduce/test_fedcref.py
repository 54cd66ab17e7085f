"""The FedCRef reproduction's table, plot and commands, from fake finished runs."""

from __future__ import annotations

import json

import pytest

from fedprune.reproduce import fedcref as F


def _fake(out, setting, d, seed, acc):
    path = F.run_dir(out, setting, d, seed)
    path.mkdir(parents=True)
    summary = {
        "acc_init": 1 - d, "acc_final": acc, "communities": 10, "true_categories": 10,
        "wrong_assoc_pct": 2.0, "clusters_total": 87, "isolated_start": 60, "isolated_end": 15,
        "iterations": 4, "wall_s": 100.0,
    }  # fmt: skip
    (path / "summary.json").write_text(json.dumps(summary))
    (path / "metrics.csv").write_text(
        "iteration,acc,communities,wrong_assoc_pct,isolated,active_clients\n"
        "1,0.8,8,1.0,60,25\n2,0.85,10,2.0,15,3\n"
    )


def test_table_and_plot(tmp_path):
    mnist = F.SETTINGS[0]
    _fake(tmp_path, mnist, 0.3, 0, 0.88)
    _fake(tmp_path, mnist, 0.3, 1, 0.86)
    table = F.aggregate(tmp_path, [0, 1])
    row = next(r for r in table if r["dataset"] == "mnist" and r["dirtiness"] == 0.3)
    assert row["seeds"] == 2 and row["acc_final"] == pytest.approx(0.87)
    assert row["paper_acc_final"] == pytest.approx(0.879)  # paper_values/fedcref_paper.csv
    F.write_markdown(table, tmp_path / "t.md", [0, 1], False)
    assert row["acc_final_ci"] == pytest.approx(0.127062, rel=1e-4)
    assert row["paper_acc_final_ci"] == 0.028 and row["acc_final_vs_paper"] == "in"
    assert row["communities_vs_paper"] == "in" and row["wrong_assoc_pct_vs_paper"] == "below"
    assert "0.870 ± 0.127 (0.879 ± 0.028) in" in (tmp_path / "t.md").read_text()
    F.write_csv(table, tmp_path / "t.csv")
    assert (tmp_path / "t.csv").read_text().startswith("dataset,dirtiness,seeds")
    F.plot_iterations(tmp_path, [0], tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 10_000


def test_plotted_acc_starts_at_the_initial_clustering(tmp_path):
    mnist = F.SETTINGS[0]
    _fake(tmp_path, mnist, 0.3, 0, 0.88)
    series = F.iteration_series(F.run_dir(tmp_path, mnist, 0.3, 0))
    assert series["acc"] == ([0, 1, 2], [pytest.approx(0.7), 0.8, 0.85])
    assert series["communities"] == ([1, 2], [8.0, 10.0])


def test_jobs_carry_dataset_options(tmp_path):
    jobs = F.jobs(tmp_path, [0], "/data")
    assert len(jobs) == 9
    kmnist = [j for j in jobs if "kmnist" in j.label]
    assert all("--split" in j.command and "test" in j.command for j in kmnist)
    fashion = [j for j in jobs if "fashion" in j.label][0].command
    assert fashion[fashion.index("--theta") + 1] == "0.15"


def test_progress_lines_name_the_iteration(tmp_path, capsys):
    from fedprune.reproduce import runner

    run = tmp_path / "fedcref-mnist-d0.3-s0"
    run.mkdir()
    (run / "metrics.csv").write_text("iteration,acc\n1,0.8\n2,0.85\n")
    runner.report_progress([run])
    assert "fedcref-mnist-d0.3-s0: iteration 2" in capsys.readouterr().err
