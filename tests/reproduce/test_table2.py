import csv
import json

import pytest

from fedprune.reproduce import table2 as T


def _fake_run(out, row, dataset, seed, acc):
    path = T.run_dir(out, row, dataset, seed)
    path.mkdir(parents=True)
    summary = {
        "finetune": {
            "3": {"avg_acc": acc, "fairness": 0.05},
            "25": {"avg_acc": acc + 0.01, "fairness": 0.04},
        },
        "comm_mb_eq13": 100.0 + seed,
        "comm_mb_payload": 110.0,
        "sparsity": 0.7,
        "wall_s": 60.0,
    }
    (path / "summary.json").write_text(json.dumps(summary))


def test_paper_values_file_has_every_row():
    paper = T.paper_values()
    names = [r.name for r in T.ROWS] + list(T.MISSING)
    for name in names:
        for dataset in T.DATASETS:
            for e in T.FT_EPOCHS:
                assert (name, dataset, e) in paper
    assert paper[("caafp_0_0_50", "uci_har", 3)]["avg_acc"] == "0.9599"


def test_aggregate_means_over_seeds_and_writes_outputs(tmp_path):
    row = next(r for r in T.ROWS if r.name == "caafp_0_0_50")
    _fake_run(tmp_path, row, "uci_har", 0, 0.90)
    _fake_run(tmp_path, row, "uci_har", 1, 0.94)
    table = T.aggregate(tmp_path, [0, 1], rows=(row,), datasets=("uci_har",))
    entry = next(r for r in table if r["method"] == row.name and r["ft_epochs"] == 3)
    assert entry["seeds"] == 2
    assert entry["avg_acc_mean"] == pytest.approx(0.92)
    assert entry["avg_acc_std"] == pytest.approx(0.02)
    assert entry["comm_mb_eq13"] == pytest.approx(100.5)
    assert entry["paper_avg_acc"] == pytest.approx(0.9599)
    T.write_csv(table, tmp_path / "t.csv")
    with open(tmp_path / "t.csv") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == T.COLUMNS
    T.write_markdown(table, tmp_path / "t.md", [0, 1], False, [("x", "abc")], 10.0, 120.0)
    text = (tmp_path / "t.md").read_text()
    assert "92.00 % ± 2.00" in text and "`x` sha256 `abc`" in text
    T.plot(table, tmp_path / "t.png")
    assert (tmp_path / "t.png").stat().st_size > 10_000


def test_finished_runs_are_not_retrained(tmp_path, monkeypatch):
    row = T.ROWS[0]
    _fake_run(tmp_path, row, "wisdm", 0, 0.9)
    monkeypatch.setattr(T.runner._Children, "run", lambda *a, **k: pytest.fail("retrained"))
    T.run_all(tmp_path, [0], None, rows=(row,), datasets=("wisdm",))


@pytest.mark.parametrize("jobs", [1, 2])
def test_missing_runs_are_trained_with_their_commands(tmp_path, monkeypatch, jobs):
    calls = []

    def fake_run(self, command, *streams):
        calls.append(command)
        return 0

    monkeypatch.setattr(T.runner._Children, "run", fake_run)
    T.run_all(tmp_path, [0, 1], "/data", rows=T.ROWS[-1:], datasets=("wisdm",), jobs=jobs)
    assert len(calls) == 2
    assert all(c[c.index("--phases") + 1] == "15,15,20" for c in calls)
    assert sorted(c[c.index("--seed") + 1] for c in calls) == ["0", "1"]
    assert all(c[c.index("--data-dir") + 1] == "/data" for c in calls)


def test_failed_run_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(T.runner._Children, "run", lambda *a, **k: 3)
    with pytest.raises(T.runner.ConfigError, match="failed \\(exit 3\\)"):
        T.run_all(tmp_path, [0], None, rows=T.ROWS[:1], datasets=("wisdm",))


def test_progress_lines_name_round_and_phase(tmp_path, capsys):
    run = tmp_path / "caafp_0_0_50-wisdm-s0"
    run.mkdir()
    (run / "metrics.csv").write_text("round,phase,cluster\n1,fedavg,-1\n7,prune,2\n")
    T.runner.report_progress([run, tmp_path / "not-started"])
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


def test_the_leak_table_subtracts_the_time_ordered_cell_from_the_random_one(tmp_path):
    def row(acc, fairness, seeds):
        base = dict.fromkeys(T.COLUMNS)
        base.update(method="caafp_0_0_50", dataset="wisdm", ft_epochs=25, seeds=seeds)
        return {**base, "avg_acc_mean": acc, "fairness_mean": fairness}

    T.write_csv([row(0.9512, 0.061, 5)], tmp_path / "table2.csv")
    T.write_csv([row(0.9876, 0.018, 5)], tmp_path / "table2_random.csv")
    ordered, leaking = (T.read_csv(tmp_path / f) for f in ("table2.csv", "table2_random.csv"))
    assert ordered[0]["avg_acc_mean"] == 0.9512 and ordered[0]["method"] == "caafp_0_0_50"
    T.write_leak(ordered, leaking, tmp_path / "leak.md")
    line = (tmp_path / "leak.md").read_text().splitlines()[-1]
    assert line == (
        "| caafp_0_0_50 | wisdm | 25 | 5 / 5 | 95.12 % | 98.76 % | +3.64 | 6.10 % | 1.80 % |"
    )
