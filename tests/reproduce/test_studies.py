"""The CA-AFP robustness studies: grids, aggregation, paper values, claims and outputs,
on fake finished runs (the real runs are `make reproduce-NAME`)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from fedprune.cli import build_parser
from fedprune.reproduce import finetune, noniid, phases, score_ablation
from fedprune.reproduce import study as S
from fedprune.reproduce.studies import STUDIES, study


def _finish(out, st, point, seed, summary):
    path = S.run_dir(out, st, point, seed)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({"seed": seed}))
    (path / "summary.json").write_text(json.dumps({"wall_s": 30.0, **summary}))


def test_every_study_resolves_and_its_paper_file_exists():
    for name in STUDIES:
        st = study(name)
        assert st.name == name
        if not st.from_paper:  # fedprune's own study: nothing to compare with
            assert not st.paper_csv.exists(), name
            continue
        rows = S.read_paper(st.paper_csv)
        assert rows, name


def test_score_ablation_grid_is_the_papers_42_runs_with_table8_arguments():
    points = score_ablation.points(quick=False)
    assert len(points) == len(S.unique_points(points)) == 2 * 3 * 7
    drift = next(
        p
        for p in points
        if p.labels
        == (("dataset", "wisdm"), ("scenario", "drift"))
        + (("alpha", "0.00"), ("beta", "0.00"), ("gamma", "1.00"))
    )
    args = " ".join(drift.args)
    for part in (
        "--phases 0,0,15",
        "--clusters 3",
        "--local-epochs 1",
        "--start-sparsity 0.3",
        "--target-sparsity 0.7",
        "--prune-frequency 5",
        "--ft-epochs 0",
        "--label-noise 0.4,1.0",
        "--alpha 0.0 --beta 0.0 --gamma 1.0",
    ):
        assert part in args
    # every paper row has a point and vice versa
    paper = {
        (r["dataset"], r["scenario"], r["alpha"], r["beta"], r["gamma"])
        for r in S.read_paper(score_ablation.STUDY.paper_csv)
    }
    assert paper == {tuple(v for _, v in p.labels) for p in points}


def test_phases_shares_the_common_point_and_matches_table7():
    points = phases.points(quick=False)
    assert len(points) == 10 + 5 + 5
    unique = S.unique_points(points)
    assert len(unique) == 18  # (0, 0, 0.5) belongs to A, B and C: trained once
    shared = [p for p in points if p.args == phases._point("A", 0, 0, 0.5).args]
    assert {p.label("study") for p in shared} == {"A", "B", "C"}
    c20 = next(p for p in points if p.label("study") == "C" and p.label("p1") == "20")
    assert "--phases 20,0,40" in " ".join(c20.args) and "--start-sparsity 0.5" in " ".join(c20.args)
    assert len(phases.points(quick=True)) == 5 + 3 + 3


def test_finetune_and_noniid_use_table2_arguments():
    from fedprune.reproduce.table2 import ROWS

    table2 = {r.name: r.args for r in ROWS}
    table2["caafp"] = table2.pop("caafp_0_0_50")
    for p in finetune.points(quick=False) + noniid.points(quick=False):
        method = p.label("method")
        if method in table2:
            assert " ".join(table2[method]) in " ".join(p.args)
    assert len(noniid.points(quick=False)) == 18


def test_finetune_fine_tunes_table2_runs_again_and_trains_only_missing_bases(tmp_path):
    from fedprune.reproduce import runner, table2

    st = finetune.STUDY
    points = st.points(False)
    done = next(p for p in points if p.label("method") == "fedsnip")
    _finish(tmp_path, st, done, 0, {})  # e.g. made before the study fine-tuned again
    bases, todo = S.jobs(st, points, [0, 1], tmp_path, None)
    # every base is the Table 2 run itself: same folder and command, so a table2
    # reproduction in the same --out has already trained it
    rows = {r.name: r for r in table2.ROWS}
    for job in bases:
        name, seed = job.target.name.rsplit("-wisdm-s", 1)
        if name in rows:
            command = table2.train_command(rows[name], "wisdm", int(seed), tmp_path, None)
            assert job.target == table2.run_dir(tmp_path, rows[name], "wisdm", int(seed))
            assert list(job.command) == command
    names = sorted(job.target.name for job in bases)
    assert "global_ft_0_0_50-wisdm-s0" in names and "caafp_0_0_50-wisdm-s1" in names
    assert "fedsnip-wisdm-s0" not in names and "fedsnip-wisdm-s1" in names
    assert len(bases) == 2 * 6 - 1 and len(todo) == 2 * 6
    derived = next(j for j in todo if j.target == S.run_dir(tmp_path, st, points[0], 1))
    assert runner.fedprune_arguments(derived.command) == (
        "finetune",
        str(tmp_path / "runs" / "caafp_0_0_50-wisdm-s1"),
        "--ft-epochs",
        "0,1,3,5,10,15,20,25",
        "--out",
        str(derived.target),
    )


def test_collect_means_over_seeds_joins_the_paper_and_writes_outputs(tmp_path):
    st = score_ablation.STUDY
    points = [p for p in st.points(False) if p.label("dataset") == "uci_har"]
    for i, p in enumerate(points):
        for seed, acc in ((0, 0.80), (1, 0.90)):
            noise = (
                {"noisy_acc": 0.5, "clean_acc": acc} if p.label("scenario") != "standard" else None
            )
            ft0 = {"avg_acc": acc - 0.001 * i, "fairness": 0.1}
            if noise:
                ft0["label_noise"] = noise
            _finish(tmp_path, st, p, seed, {"finetune": {"0": ft0}, "sparsity": 0.7})
    table = S.join_paper(st, S.collect(st, points, [0, 1], tmp_path))
    first = table[0]
    assert first["acc"] == pytest.approx(0.85) and first["acc_std"] == pytest.approx(0.05)
    assert first["score"] == pytest.approx((0.80 / 0.1 + 0.90 / 0.1) / 2)
    # the paper's Table 4 value of this cell (standard, 1.00, 0.00, 0.00, UCI-HAR)
    assert first["scenario"] == "standard" and first["alpha"] == "1.00"
    assert first["paper_acc"] == pytest.approx(0.8964)
    assert first["diff_acc"] == pytest.approx(0.85 - 0.8964)
    means = {r["scenario"]: r for r in score_ablation.means(table)}
    assert means["standard"]["paper_acc"] == pytest.approx(0.876)
    best = {r["scenario"]: r for r in score_ablation.best(table)}
    assert best["standard"]["best (ours)"] == "1.00, 0.00, 0.00"  # the highest score
    assert best["standard"]["best (paper)"] == "0.25, 0.25, 0.50"  # Table 3
    claims = {c.text: c for c in st.claims(table)}
    order = claims["uci_har: Standard > Noisy > Drift in mean accuracy"]
    # the fake accuracies fall by 0.1 pp per point, and standard's points come first
    assert order.holds is True and "standard 84.7 %, noisy 84.0 %, drift 83.3 %" in order.evidence
    assert claims["every run ends at 70 ± 0.5 % sparsity"].holds is True
    S.write_csv(table, tmp_path / "t.csv")
    with open(tmp_path / "t.csv") as f:
        assert len(list(csv.DictReader(f))) == 21
    S.write_markdown(st, table, tmp_path / "t.md", st.body(table), [0, 1], False, [("f", "h")], 9.0)
    text = (tmp_path / "t.md").read_text()
    assert "| uci_har | standard | 1.00 | 0.00 | 0.00 | 85.00 ± 5.00 | 89.64 | -4.64 |" in text
    assert "**holds**" in text and "**does not hold**" in text and "`f` sha256 `h`" in text
    st.plot(table, tmp_path / "t.png")
    assert (tmp_path / "t.png").stat().st_size > 10_000


def test_one_run_gives_a_row_per_finetuning_length(tmp_path):
    st = finetune.STUDY
    points = st.points(False)
    for p in points:
        ft = {str(e): {"avg_acc": 0.8 + e / 250, "fairness": 0.1} for e in finetune.FT_EPOCHS}
        _finish(tmp_path, st, p, 0, {"finetune": ft})
    table = S.join_paper(st, S.collect(st, points, [0], tmp_path))
    assert len(table) == 6 * len(finetune.FT_EPOCHS)
    row = next(r for r in table if r["method"] == "caafp" and r["ft"] == "25")
    assert row["acc"] == pytest.approx(0.9) and row["paper_acc"] == pytest.approx(0.96)
    assert row["wall_s"] == pytest.approx(30.0 / len(finetune.FT_EPOCHS))
    assert (
        next(r for r in table if r["method"] == "fedchar" and r["ft"] == "3")["paper_acc"] is None
    )


def test_noniid_claims_read_the_leads(tmp_path):
    table = [
        {"k": str(k), "method": m, "acc": acc}
        for k, accs in ((1, (0.8, 0.5, 0.4)), (2, (0.85, 0.7, 0.6)), (3, (0.9, 0.88, 0.85)))
        for m, acc in zip(("caafp", "fedsnip", "efficientfl"), accs)
    ] + [
        {"k": str(k), "method": m, "acc": 0.9} for k in (1, 2, 3) for m in ("fedchar", "clusterfl")
    ]
    claims = {c.text: c for c in noniid.claims(table)}
    lead = claims["CA-AFP's lead over the best pruned baseline grows as k falls"]
    assert lead.holds is True and "k=1: +30.0 pp" in lead.evidence
    assert claims["k=1: caafp at about 80 % (within 5 pp)"].holds is True


def test_a_missing_dataset_is_one_line_before_any_training(tmp_path, monkeypatch):
    monkeypatch.setattr(S.runner, "run_jobs", lambda *a, **k: pytest.fail("trained"))
    from fedprune.errors import FedpruneError

    (tmp_path / "empty").mkdir()
    with pytest.raises(FedpruneError, match="wisdm"):
        S.reproduce(phases.STUDY, tmp_path / "out", data_dir=str(tmp_path / "empty"))
    assert not (tmp_path / "out").exists()


def test_every_study_has_a_command_with_the_papers_seed_count():
    parser = build_parser()
    for name in STUDIES:
        args = parser.parse_args(["reproduce", name])
        assert args.seeds is None and args.target == name
    assert study("score-ablation").default_seeds == 1
    assert study("phases").default_seeds == 3


def test_every_point_of_every_study_is_a_valid_train_command():
    """Each point's arguments (full and quick grids, and a base run's) build the method's
    configuration as ``fedprune train`` would: no bad value and no option the method does
    not use (which the command line refuses)."""
    from fedprune.configs.command_line import config_from_options
    from fedprune.methods import METHODS

    parser = build_parser()
    for name in STUDIES:
        st = study(name)
        for quick in (False, True):
            for point in st.points(quick):
                runs = [point.args] + ([point.again.args] if point.again else [])
                for args in runs:
                    parsed = parser.parse_args(["train", point.method, *args, "--out", "o"])
                    config_from_options(METHODS[point.method].config, parsed, point.method)


def test_help_states_each_studys_own_seed_counts(capsys):
    """--help reads STUDIES (no study import): its numbers must be the studies' own."""
    parser = build_parser()
    for name, command in STUDIES.items():
        st = study(name)
        assert command.seeds == st.default_seeds, name
        with pytest.raises(SystemExit):
            parser.parse_args(["reproduce", name, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert f"(default: {st.default_seeds}; integer >= 1)" in text, name
        assert f"train less: {command.quick}" in text, name
        if st.quick_seeds > 1:
            assert f"seeds 0-{st.quick_seeds - 1}" in command.quick, name
        else:
            assert "seed 0" in command.quick or "one seed" in command.quick, name


def test_ascfl_grid_shares_points_and_claims_read_the_rows(tmp_path):
    from fedprune.reproduce import ascfl

    quick = ascfl.points(quick=True)
    assert [p.label("method") for p in quick] == [*ascfl.MAIN, "ascfl iid labels"]
    full = ascfl.points(quick=False)
    # alpha 0.4's AS-CFL and CFL are the main comparison's MNIST runs, and the ablation's
    # full AS-CFL is alpha 0.6's and the default theta's: each trained once
    assert len(S.unique_points(full)) == len(full) - 4
    default_theta = next(p for p in full if p.label("method") == "ascfl theta 0.85")
    assert default_theta.stem == "ascfl_dataset_mnist_alpha_0.6"
    fedavg = next(p for p in full if p.label("method") == "fedavg")
    assert fedavg.method == "ifca" and "--clusters 1" in " ".join(fedavg.args)
    st = ascfl.STUDY
    for p in quick:
        acc = {"ascfl": 0.9, "cfl": 0.905, "fedavg": 0.8}.get(p.label("method"), 0.85)
        summary = {
            "final_acc": acc,
            "peak_acc": acc,
            "rounds_to_90pct_peak": 10 if p.label("method") == "ascfl" else 12,
            "clusters": 4,
            "ari": 0.95,
            "mean_stability": 0.8,
            "uplink_mb": 100.0,
            "uplink_lowrank_mb": 70.0,
            "rounds": 10,
        }
        _finish(tmp_path, st, p, 0, summary)
    table = S.join_paper(st, S.collect(st, quick, [0], tmp_path))
    row = next(r for r in table if r["method"] == "ascfl")
    assert row["paper_acc"] == pytest.approx(0.910) and row["uplink_mb"] == pytest.approx(10.0)
    claims = {c.text.split(" [")[0]: c for c in st.claims(table)}
    assert claims["MNIST α=0.4: AS-CFL >= CFL − 1 pp"].holds is True  # −0.5 pp
    assert claims["MNIST α=0.4: AS-CFL >= FedAvg + 3 pp"].holds is True
    assert claims["rounds to 90 % of peak: AS-CFL <= CFL"].holds is True
    assert "30.0 %" in claims["low-rank uplink saving (shared-basis reading)"].evidence
    assert claims[
        "rotation-only clients: AS-CFL's clusters reach ARI >= 0.9 against the rotation groups "
        "by round 30"
    ].holds


def test_data_files_of_an_image_dataset_are_its_four_official_files(tmp_path):
    from fedprune.data import images
    from tests.data.test_images import write_idx_pair

    for split in images.SPLITS:
        x = np.zeros((2, 28, 28), dtype=np.uint8)
        write_idx_pair(tmp_path / "mnist", images.file_names("mnist", split), x, np.arange(2))
    files = S.data_files(("mnist",), str(tmp_path))
    assert len(files) == 4 and all(len(sha) == 64 for _, sha in files)
    assert {p.split("/")[-1] for p, _ in files} == {
        images.file_names("mnist", s)[r] for s in images.SPLITS for r in ("images", "labels")
    }


def test_row_lookup_compares_labels_as_text_and_near_paper_uses_the_tolerance():
    table = [
        {"method": "caafp", "ft": "0", "acc": 0.87},
        {"method": "caafp", "ft": "25", "acc": 0.95},
    ]
    assert S.row_of(table, method="caafp", ft=25) is table[1]
    assert S.value_of(table, method="caafp", ft=0) == 0.87
    assert S.value_of(table, method="fedsnip", ft=0) is None
    inside = S.near_paper("CA-AFP at FT 0", 0.87, 0.88, 0.02)
    outside = S.near_paper("CA-AFP at FT 0", 0.85, 0.88, 0.02)
    assert inside.holds and not outside.holds
    assert "within 2 pp" in inside.text and "85.0 %" in outside.evidence


def test_fedhire_study_joins_table3_and_counts_cells_within_the_tolerance(tmp_path):
    from fedprune.reproduce import fedhire

    st = fedhire.STUDY
    quick, full = fedhire.points(quick=True), fedhire.points(quick=False)
    assert len(quick) == 20 and len(full) == 20 + 10 + 6 * 3 + 20
    paper_split = next(p for p in full if p.label("partition") == "paper")
    assert " ".join(paper_split.args).endswith("--partition paper")
    assert len(S.unique_points(full)) == len(full)  # every point its own run directory
    assert st.quick_seeds == 3 and st.default_seeds == 10
    both = next(p for p in full if p.label("method") == "kmeans+kmeans")
    assert " ".join(both.args).endswith("--client-method kmeans --server-method kmeans")
    paper = {(r["dataset"], r["method"]): r for r in S.read_paper(st.paper_csv)}
    for p in full:  # fake runs: Fed-HIRE at the paper's mean + 0.04, k-FED at its mean
        theirs = paper.get((p.label("dataset"), p.label("method")))
        for seed in (0, 1):
            shift = 0.04 if p.label("method") == "fedhire" else 0.0
            values = {i: (float(theirs[i]) if theirs else 0.1) + shift for i in fedhire.INDICES}
            if p.label("dataset") == "ecoli" and p.label("method") == "fedhire":
                values["ari"] = 0.452 + 0.19  # the paper's std is 0.09: tolerance 0.18
            _finish(tmp_path, st, p, seed, {**values, "cpu_s": 1.0})
    table = S.join_paper(st, S.collect(st, full, [0, 1], tmp_path))
    row = S.row_of(table, dataset="ecoli", partition="authors", method="fedhire")
    assert row["paper_ari"] == pytest.approx(0.452) and row["paper_ari_std"] == pytest.approx(0.09)
    assert S.row_of(table, dataset="ecoli", method="kmeans+kmeans")["paper_ari"] is None
    assert fedhire.tolerance(0.09) == pytest.approx(0.18) and fedhire.tolerance(0.0) == 0.05
    claims = {c.text: c for c in st.claims(table)}
    within = claims["Fed-HIRE within max(0.05, 2 std) of Table 3 in at least 36 of 40 cells"]
    assert within.holds is True and within.evidence.startswith("39 of 40")
    assert "ecoli ari +0.190" in within.evidence
    assert claims["Fed-HIRE above k-FED in most cells (Table 3, §4.2 observation 1)"].holds
    text = "\n".join(st.body(table))
    assert "39 of 40" in text and "## Table 4" in text


def test_phases_steep_drop_claim_needs_a_fall_beyond_the_seed_spread():
    from fedprune.reproduce import phases

    def study_a(accs: list[float], std: float) -> list[dict]:
        return [
            {
                "study": "A",
                "p1": "0",
                "p2": "0",
                "start": f"{0.1 * i:.1f}",
                "acc": acc,
                "acc_std": std,
                "comm_mib": 240.0 - 18 * i,
            }
            for i, acc in enumerate(accs)
        ]

    text = "Study A: beyond a start sparsity of 0.5 accuracy drops steeply"
    flat_then_dip = [0.925] * 6 + [0.924, 0.923, 0.922, 0.921]  # 0.4 pp lost after 0.5
    noisy = {c.text.split(" (")[0]: c for c in phases.claims(study_a(flat_then_dip, 0.007))}
    assert noisy[text].holds is False and "0.40 pp lost from 0.5 to 0.9" in noisy[text].evidence
    assert "-0.10 pp above" in noisy[text].evidence and "up to 0.70 pp" in noisy[text].evidence
    steep = {c.text.split(" (")[0]: c for c in phases.claims(study_a(flat_then_dip, 0.002))}
    assert steep[text].holds is True
    comm = "Study A: communication falls as the start sparsity rises"
    assert steep[comm].holds is True


def test_again_agreement_compares_each_fine_tuned_again_run_with_its_base(tmp_path):
    st = finetune.STUDY
    point = next(p for p in st.points(True) if p.label("method") == "caafp")
    base = S.base_dir(tmp_path, point.again, 0)
    base.mkdir(parents=True)
    (base / "config.json").write_text(json.dumps({"seed": 0}))
    at = {"3": {"avg_acc": 0.93, "fairness": 0.1}, "25": {"avg_acc": 0.96, "fairness": 0.08}}
    (base / "summary.json").write_text(json.dumps({"finetune": at}))
    again = {e: {"avg_acc": 0.5, "fairness": 0.2} for e in map(str, finetune.FT_EPOCHS)}
    _finish(tmp_path, st, point, 0, {"finetune": {**again, **at}})
    equal = S.again_agreement(st, [point], [0], tmp_path)
    assert equal.holds is True and equal.evidence == "2 of 2 (method, seed, length) pairs equal"
    _finish(tmp_path, st, point, 0, {"finetune": {**again, "3": at["3"]}})  # FT 25 differs
    unequal = S.again_agreement(st, [point], [0], tmp_path)
    assert unequal.holds is False and unequal.evidence.endswith("caafp_0_0_50-wisdm seed 0 FT 25")
    S.write_markdown(st, [], tmp_path / "t.md", [], [0], True, [], 1.0, checks=[unequal])
    text = (tmp_path / "t.md").read_text()
    assert "## Checks of this reproduction" in text and "exactly: **does not hold**" in text
    plain = score_ablation.STUDY.points(True)[:1]
    assert S.again_agreement(score_ablation.STUDY, plain, [0], tmp_path) is None


def _metrics(out, st, point, seed, rows):
    path = S.run_dir(out, st, point, seed) / "metrics.csv"
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_round_values_stack_the_seeds_metrics_and_refuse_unequal_runs(tmp_path):
    from fedprune.errors import DataError
    from fedprune.reproduce import ascfl

    st = ascfl.STUDY
    points = ascfl.points(quick=True)
    for p in points:
        for seed in (0, 1):
            _finish(tmp_path, st, p, seed, {})
            rows = [
                {"round": r, "acc": 0.5 + 0.1 * r + 0.01 * seed, "ari": "" if r == 1 else 0.5}
                for r in (1, 2, 3)
            ]
            _metrics(tmp_path, st, p, seed, rows)
    values = S.round_values(st, points, [0, 1], tmp_path, ("acc", "ari"))
    acc = values[points[0].labels]["acc"]
    np.testing.assert_allclose(acc, [[0.6, 0.7, 0.8], [0.61, 0.71, 0.81]])
    ari = values[points[0].labels]["ari"]
    assert np.isnan(ari[:, 0]).all() and (ari[:, 1:] == 0.5).all()  # an empty cell is NaN
    st.curves(points, values, tmp_path / "c.png")  # quick grid: MNIST and rotation panels
    assert (tmp_path / "c.png").stat().st_size > 10_000
    with pytest.raises(DataError, match="no column 'stability'"):
        S.round_values(st, points, [0, 1], tmp_path, ("stability",))
    _metrics(tmp_path, st, points[0], 1, [{"round": 1, "acc": 0.5, "ari": 0.0}])
    with pytest.raises(DataError, match="different round counts"):
        S.round_values(st, points, [0, 1], tmp_path, ("acc",))


def test_after_run_steps_run_jobs_at_a_time_in_the_grids_order(tmp_path):
    """With ``parallel=2`` two runs' after-steps are under way at once (a barrier of two
    would break otherwise); what they return keeps the grid's order, and ``"auto"`` runs
    them one at a time."""
    import dataclasses
    import threading

    together = threading.Barrier(2, timeout=60)
    active, most = [0], [0]
    lock = threading.Lock()

    def step(run, data_dir, wait=True):
        with lock:
            active[0] += 1
            most[0] = max(most[0], active[0])
        if wait:
            together.wait()
        with lock:
            active[0] -= 1
        return {"run": run.name}

    points = finetune.STUDY.points(False)[:4]
    st = dataclasses.replace(finetune.STUDY, after_run=step)
    found, _ = S.after_runs(st, points, [0], tmp_path, None, parallel=2)
    paths = [S.run_dir(tmp_path, st, p, 0) for p in S.unique_points(points)]
    assert list(found) == paths and [v["run"] for v in found.values()] == [p.name for p in paths]
    assert most[0] == 2
    most[0] = 0
    st = dataclasses.replace(st, after_run=lambda run, d: step(run, d, wait=False))
    S.after_runs(st, points, [0], tmp_path, None, parallel="auto")
    assert most[0] == 1


def test_a_failed_after_run_step_stops_the_ones_not_started(tmp_path):
    import dataclasses

    started = []

    def step(run, data_dir):
        started.append(run)
        raise RuntimeError(f"export of {run.name} failed")

    points = finetune.STUDY.points(False)
    st = dataclasses.replace(finetune.STUDY, after_run=step)
    with pytest.raises(RuntimeError, match="failed"):
        S.after_runs(st, points, [0, 1], tmp_path, None, parallel=2)
    assert len(started) <= 2  # the failed one, and one the other worker had begun
