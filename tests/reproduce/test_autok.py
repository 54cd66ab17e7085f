"""``fedprune reproduce autok``: the grid pairs fixed and auto K point for point, each run's
summary is read by its method, and the goals are checked on the aggregated rows (fake
finished runs; the real ones are `make reproduce-autok`)."""

from __future__ import annotations

import json

import pytest

from fedprune.reproduce import autok
from fedprune.reproduce import study as S


def _finish(out, point, seed, summary):
    path = S.run_dir(out, autok.STUDY, point, seed)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({"seed": seed}))
    (path / "summary.json").write_text(json.dumps({"wall_s": 10.0, **summary}))


def _strip_clusters(args):
    """A point's arguments without what only fixed and auto K change."""
    text = " ".join(args)
    for choice in ("--clusters auto", "--clusters 3", "--clusters 4"):
        text = text.replace(choice, "")
    return text.replace("--local-k auto", "").replace("--init kmeans-ae", "").split()


def test_every_fixed_point_has_its_auto_twin_with_the_same_arguments():
    points = autok.points(quick=False)
    assert len(points) == len(S.unique_points(points)) == 2 * (2 + 3 + 2 + 3)
    by_cell = {}
    for p in points:
        cell = tuple(kv for kv in p.labels if kv[0] != "clusters")
        by_cell.setdefault(cell, {})[p.label("clusters")] = p
    for cell, pair in by_cell.items():
        assert set(pair) == {"fixed", "auto"}, cell
        assert pair["fixed"].method == pair["auto"].method
        assert _strip_clusters(pair["fixed"].args) == _strip_clusters(pair["auto"].args), cell
    table2 = next(p for p in points if p.labels[0] == ("part", "table2"))
    assert "--phases 0,0,50" in " ".join(table2.args)
    assert "--split time-ordered --ft-epochs 3,25" in " ".join(table2.args)


def _caafp(acc3, acc25, chosen=None):
    summary = {
        "method": "caafp",
        "clusters": {"0": 20, "1": 6, "2": 4},
        "finetune": {
            "3": {"avg_acc": acc3, "fairness": 0.07},
            "25": {"avg_acc": acc25, "fairness": 0.06},
        },
    }
    return summary if chosen is None else {**summary, "clusters_chosen": chosen}


def test_measure_reads_each_method_and_the_goals_are_checked(tmp_path):
    points = autok.points(quick=True)
    accs = {  # (part, dataset or k or labels, choice) -> accuracy
        ("table2", "uci_har"): (0.96, 0.97, 0.955, 0.972),
        ("table2", "wisdm"): (0.93, 0.95, 0.915, 0.951),  # auto FT3 1.5 pp below
    }
    for p in points:
        labels = dict(p.labels)
        auto = labels["clusters"] == "auto"
        if labels["part"] == "table2":
            f3, f25, a3, a25 = accs[("table2", labels["dataset"])]
            summary = _caafp(a3, a25, 1) if auto else _caafp(f3, f25)
        elif labels["part"] == "noniid":
            acc = 1.0 if auto else 0.6
            summary = {
                "method": "caafp",
                "clusters": {"0": 7, "1": 10, "2": 13},
                "finetune": {"0": {"avg_acc": acc, "fairness": 0.0}},
                **({"clusters_chosen": 6} if auto else {}),
            }
        elif labels["part"] == "rotated":
            summary = {"method": "ifca", "final_acc": 0.9, "ari": 1.0, "clusters": 4}
            if auto:
                summary["clusters_chosen"] = 4
        else:
            summary = {"method": "fedcref", "acc_final": 0.7, "communities": 8, "mean_k": 3.2}
            if auto:
                summary["local_k_mean_abs_diff"] = 1.2
        _finish(tmp_path, p, 0, summary)
    table = S.collect(autok.STUDY, points, [0], tmp_path)
    fixed = S.row_of(table, part="table2", dataset="uci_har", ft="25", clusters="fixed")
    assert fixed["acc"] == pytest.approx(0.97) and fixed["K"] == 3.0
    chosen = S.row_of(table, part="noniid", k="1", ft="0", clusters="auto")
    assert chosen["K"] == 6.0 and chosen["acc"] == 1.0
    cref = S.row_of(table, part="fedcref", dataset="kmnist", clusters="auto")
    assert cref["k_error"] == pytest.approx(1.2) and cref["communities"] == 8.0
    claims = {c.text: c for c in autok.claims(table)}
    table2 = claims["on every Table 2 cell, auto K is at most 1 pp below K = 3"]
    assert table2.holds is False and "wisdm FT3: -1.50 pp" in table2.evidence
    extreme = claims["at non-IID k = 1, auto K is at least 5 pp above K = 3"]
    assert extreme.holds is True and "+40.00 pp" in extreme.evidence
    autok.plot(table, tmp_path / "autok.png")
    assert (tmp_path / "autok.png").stat().st_size > 0
    body = "\n".join(autok.body(table))
    assert "## IFCA on rotated MNIST: K = 4 against auto" in body
    assert "mean \\|K_i - classes\\|" in body or "mean |K_i - classes|" in body


def test_a_study_of_our_own_needs_no_paper_file():
    assert autok.STUDY.from_paper is False and not autok.STUDY.paper_csv.exists()
    table = [{"part": "table2", "acc": 0.9}]
    assert S.join_paper(autok.STUDY, table) == table
