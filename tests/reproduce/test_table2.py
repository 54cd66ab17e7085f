"""Table 2's reproduction, a Study: its runs, commands, table, page, figure and leak page,
from fake finished runs."""

import csv
import json
from pathlib import Path

import pytest

from fedprune.reproduce import study as S
from fedprune.reproduce import table2 as T


def _fake_run(out, row, dataset, seed, acc, split="time-ordered", wall_s=60.0):
    path = T.run_dir(out, row, dataset, seed, split)
    path.mkdir(parents=True)
    summary = {
        "finetune": {
            "3": {"avg_acc": acc, "fairness": 0.05},
            "25": {"avg_acc": acc + 0.01, "fairness": 0.04},
        },
        "comm_mb_eq13": 100.0 + seed,
        "comm_mb_payload": 110.0,
        "sparsity": 0.7,
        "wall_s": wall_s,
    }
    (path / "config.json").write_text(json.dumps({"seed": seed}))
    (path / "summary.json").write_text(json.dumps(summary))


def _every_run(out, split="time-ordered", seeds=(0,), acc=0.9):
    for seed in seeds:
        for row in T.ROWS:
            for dataset in T.DATASETS:
                _fake_run(out, row, dataset, seed, acc + seed / 100, split, wall_s=90.0)


def test_paper_values_file_has_every_row():
    paper = {(r["method"], r["dataset"], r["ft_epochs"]) for r in T.paper_values()}
    for row in T.ROWS:
        for dataset in T.DATASETS:
            for e in T.FT_EPOCHS:
                assert (row.name, dataset, str(e)) in paper


def test_runs_keep_the_names_other_studies_share():
    st = T.study()
    names = [S.run_dir(Path("o"), st, p, 2).name for p in st.points(False)]
    assert names[:2] == ["fedchar-wisdm-s2", "clusterfl-wisdm-s2"]
    assert len(names) == len(set(names)) == len(T.ROWS) * len(T.DATASETS)
    assert T.run_dir(Path("o"), T.ROWS[0], "uci_har", 1, "random").parts == (
        "o",
        "runs-random",
        "fedchar-uci_har-s1",
    )


def test_means_over_seeds_with_the_papers_values_in_the_published_columns(tmp_path):
    row = next(r for r in T.ROWS if r.name == "caafp_0_0_50")
    _fake_run(tmp_path, row, "uci_har", 0, 0.90)
    _fake_run(tmp_path, row, "uci_har", 1, 0.94)
    st = T.study()
    points = [T.point(row, "uci_har")]
    table = [st.publish(r) for r in S.join_paper(st, S.collect(st, points, [0, 1], tmp_path))]
    entry = next(r for r in table if r["ft_epochs"] == "3")
    assert tuple(entry) == T.COLUMNS
    assert entry["seeds"] == 2
    assert entry["avg_acc_mean"] == pytest.approx(0.92)
    assert entry["avg_acc_std"] == pytest.approx(0.02)
    assert entry["comm_mb_eq13"] == pytest.approx(100.5)
    assert entry["paper_avg_acc"] == pytest.approx(0.9599)
    assert entry["paper_comm_mb"] == pytest.approx(122.0)
    one = [st.publish(r) for r in S.join_paper(st, S.collect(st, points, [0], tmp_path))]
    assert one[0]["avg_acc_std"] == 0.0  # one seed: a population std of 0, not "unknown"


def test_reproduce_writes_table_page_and_figure_without_retraining(tmp_path, monkeypatch):
    _every_run(tmp_path, seeds=(0, 1))
    monkeypatch.setattr(T.S.runner._Children, "run", lambda *a, **k: pytest.fail("retrained"))
    monkeypatch.setattr(S, "data_files", lambda *a: [("x", "abc")])
    md = T.reproduce(tmp_path, seeds=2)
    assert md == tmp_path / "table2.md"
    with open(tmp_path / "table2.csv") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == T.COLUMNS and len(rows) == len(T.ROWS) * len(T.DATASETS) * 2
    text = md.read_text()
    assert text.startswith("# Table 2 of the CA-AFP paper, reproduced\n\nSplit: **time-ordered**")
    # 24 runs of 90 s, each counted once though it gives two rows
    assert "Training time: 36.0 min summed over the runs' own wall times" in text
    assert "| fedchar | wisdm | 3 | 2 | 90.50 % ± 0.50 | 96.64 % |" in text
    assert "`x` sha256 `abc`" in text and text.rstrip().endswith("per kind.")
    assert (tmp_path / "table2.png").stat().st_size > 10_000
    assert not (tmp_path / T.LEAK).exists()  # the random split's table is not there yet


def test_quick_writes_the_same_file_names(tmp_path, monkeypatch):
    _every_run(tmp_path)
    monkeypatch.setattr(S, "data_files", lambda *a: [])
    assert T.reproduce(tmp_path, quick=True) == tmp_path / "table2.md"
    assert "Seeds: 0 (**--quick: one seed only**)" in (tmp_path / "table2.md").read_text()


def test_missing_runs_are_trained_with_their_commands(tmp_path):
    st = T.study()
    points = [p for p in st.points(False) if p.label("method") == "caafp_15_15_20"][:1]
    bases, todo = S.jobs(st, points, [0, 1], tmp_path, "/data")
    assert not bases and len(todo) == 2
    calls = [list(j.command) for j in todo]
    assert all(c[c.index("--phases") + 1] == "15,15,20" for c in calls)
    assert sorted(c[c.index("--seed") + 1] for c in calls) == ["0", "1"]
    assert all(c[c.index("--data-dir") + 1] == "/data" for c in calls)
    assert calls[0] == T.train_command(T.ROWS[-1], "wisdm", 0, tmp_path, "/data")


def test_progress_lines_name_round_and_phase(tmp_path, capsys):
    run = tmp_path / "caafp_0_0_50-wisdm-s0"
    run.mkdir()
    (run / "metrics.csv").write_text("round,phase,cluster\n1,fedavg,-1\n7,prune,2\n")
    S.runner.report_progress([run, tmp_path / "not-started"])
    assert "caafp_0_0_50-wisdm-s0: round 7, phase prune" in capsys.readouterr().err


def test_paper_eq13_counts_model_transfers_in_mib():
    # what Eq. 13 sums: the rounds' model transfers, bytes / 1024²
    assert T.paper_eq13_mib({"comm_mib_eq13_by_kind": {"models": 3.5, "clustering": 1.0}}) == 3.5
    # a summary written before the MiB figures: MB (10^6 bytes) of the models, converted
    older = {"comm_mb_eq13": 9.0, "comm_mb_eq13_by_kind": {"models": 1.048576, "statistics": 8}}
    assert T.paper_eq13_mib(older) == pytest.approx(1.0)
    assert T.paper_eq13_mib({"comm_mb_eq13": 2.097152}) == pytest.approx(2.0)  # FedAvg-like


def test_each_split_trains_into_its_own_run_directories(tmp_path):
    row = T.ROWS[0]
    ordered = T.train_command(row, "wisdm", 1, tmp_path, None)
    leaking = T.train_command(row, "wisdm", 1, tmp_path, None, split="random")
    assert ordered[ordered.index("--split") + 1] == "time-ordered"
    assert leaking[leaking.index("--split") + 1] == "random"
    assert ordered[-1] == str(tmp_path / "runs" / "fedchar-wisdm-s1")
    assert leaking[-1] == str(tmp_path / "runs-random" / "fedchar-wisdm-s1")


def test_the_leak_page_follows_once_both_splits_are_reproduced(tmp_path, monkeypatch):
    _every_run(tmp_path, acc=0.9)
    _every_run(tmp_path, "random", acc=0.95)
    monkeypatch.setattr(S, "data_files", lambda *a: [])
    T.reproduce(tmp_path, seeds=1)
    assert not (tmp_path / T.LEAK).exists()
    assert T.reproduce(tmp_path, seeds=1, split="random") == tmp_path / "table2_random.md"
    assert "Split: **random**" in (tmp_path / "table2_random.md").read_text()
    lines = (tmp_path / T.LEAK).read_text().splitlines()
    assert "| fedchar | wisdm | 3 | 1 / 1 | 90.00 % | 95.00 % | +5.00 | 5.00 % | 5.00 % |" in lines


def test_the_leak_table_subtracts_the_time_ordered_cell_from_the_random_one(tmp_path):
    def row(acc, fairness, seeds):
        base = dict.fromkeys(T.COLUMNS)
        base.update(method="caafp_0_0_50", dataset="wisdm", ft_epochs=25, seeds=seeds)
        return {**base, "avg_acc_mean": acc, "fairness_mean": fairness}

    S.write_csv([row(0.9512, 0.061, 5)], tmp_path / "table2.csv")
    S.write_csv([row(0.9876, 0.018, 5)], tmp_path / "table2_random.csv")
    ordered, leaking = (T.read_csv(tmp_path / f) for f in ("table2.csv", "table2_random.csv"))
    assert ordered[0]["avg_acc_mean"] == 0.9512 and ordered[0]["method"] == "caafp_0_0_50"
    T.write_leak(ordered, leaking, tmp_path / "leak.md")
    line = (tmp_path / "leak.md").read_text().splitlines()[-1]
    assert line == (
        "| caafp_0_0_50 | wisdm | 25 | 5 / 5 | 95.12 % | 98.76 % | +3.64 | 6.10 % | 1.80 % |"
    )
