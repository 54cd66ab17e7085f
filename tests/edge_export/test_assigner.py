"""A clustering run's assigner: ``edge-export`` of a Fed-HIRE, k-FED or federated k-means run
writes one float32 TFLite file per client that gives a raw sample the cluster the run gave
it. Checked: a hand-computed nearest-centroid case and Fed-HIRE's weighted winner, the
run's own labels on every object of tiny fixture runs (per method, through the command),
and the one-line errors (other formats, --micro, an older run, a damaged file)."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from edge_export import assigner as export
from edge_export.cli import main
from fedprune.configs import fedhire as configs
from fedprune.errors import DataError
from fedprune.runs import names
from fedprune.runs.assigner import Assigner, ClientAssigner, read_assigner
from tests.algorithms.fedhire.test_run import _blobs_ecoli

# the builtin ops an assigner may use (module docstring of edge_export.assigner)
OPS = {"SUB", "MUL", "ADD", "SQUARED_DIFFERENCE", "SUM", "SQRT", "LOG", "ARG_MIN"}
OPS |= {"GATHER", "RESHAPE"}


def _tflite_clusters(assigner: Assigner, client: int, raw: np.ndarray) -> list[int]:
    content = export.assigner_tflite(assigner, client)
    assert set(export.builtin_ops(content)) <= OPS
    clusters, _ = export.run_assigner(content, raw)
    return clusters.tolist()


def test_two_separated_centroids_by_hand():
    # raw (1, 1) encodes to (0, 0), raw (21, 21) to (10, 10): the first is nearest centre 0,
    # whose cluster is 1, the second nearest centre 1, cluster 0
    centres = np.array([[0.0, 0.0], [10.0, 10.0]])
    a = Assigner("kfed", "gaussian", 2, [ClientAssigner(centres, np.array([1, 0]))])
    a = a.with_encoding(np.array([1.0, 1.0]), np.array([2.0, 2.0]), ("u", "v"))
    raw = np.array([[1.0, 1.0], [21.0, 21.0]])
    assert a.assign(0, raw).tolist() == [1, 0]
    assert _tflite_clusters(a, 0, raw) == [1, 0]


@pytest.mark.parametrize("similarity", ["gaussian", "inverse"])
def test_fedhire_winner_weighs_distance_by_the_factors_by_hand(similarity):
    # z = (0.9, 5): the weight 0 drops the second feature; d = 0.9 to centre 0 and 1.1 to
    # centre 1, so centre 0 is nearer. With gamma w = 0.5 and 1, Eq. 4's winner is centre 1:
    # gaussian 0.5 exp(-0.81 / 2) = 0.333 < exp(-1.21 / 2) = 0.546; inverse 0.5 / 0.9 <
    # 1 / 1.1. Equal factors keep centre 0.
    centres = np.array([[0.0, 0.0], [2.0, 0.0]])
    weights = np.array([[1.0, 0.0], [1.0, 0.0]])
    raw = np.array([[0.9, 5.0]])
    for factors, expected in (([0.5, 1.0], [7]), ([1.0, 1.0], [3])):
        client = ClientAssigner(centres, np.array([3, 7]), weights, np.log(factors))
        a = Assigner("fedhire", similarity, 8, [client])
        assert a.assign(0, raw).tolist() == expected
        assert _tflite_clusters(a, 0, raw) == expected
    assert 0.5 * math.exp(-0.81 / 2) < math.exp(-1.21 / 2) and 0.5 / 0.9 < 1 / 1.1


def test_the_methods_with_an_assigner_are_the_clustering_configurations():
    methods = [
        c.__dataclass_fields__["method"].default
        for c in (configs.FedHireConfig, configs.KFedConfig, configs.FedKMeansConfig)
    ]
    assert export.CLUSTERING_METHODS == tuple(methods)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tff_context):
    """Fed-HIRE, k-FED and federated k-means runs on a tiny Ecoli-format table (three
    blobs, 3 clients of the paper partition), and the data folder."""
    from fedprune.algorithms.fedhire.experiment import run_fedhire

    folder = tmp_path_factory.mktemp("assigner-runs")
    _blobs_ecoli(folder)
    small = dict(dataset="ecoli", partition="paper", num_clients=3, k_star=3)
    for method, config in (
        ("fedhire", configs.FedHireConfig(**small)),
        ("kfed", configs.KFedConfig(**small)),
        ("fedkmeans", configs.FedKMeansConfig(**small, rounds=3)),
    ):
        run_fedhire(config, folder / method, folder, progress=False)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("method", export.CLUSTERING_METHODS)
def test_the_exported_assigners_give_the_runs_labels(runs, method, tmp_path, capsys):
    summary = json.loads((runs / method / names.SUMMARY).read_text())
    assert summary["deploy"]["kind"] == "assigner"
    assert summary["deploy"]["input_shape"] == [7]
    out = tmp_path / "out"
    args = [str(runs / method), "--out", str(out), "--data-dir", str(runs), "--no-progress"]
    assert main(args) == 0
    assert "get the run's own cluster" in capsys.readouterr().out
    report = json.loads((out / "export_report.json").read_text())
    assert [e["client"] for e in report] == [0, 1, 2]
    for entry in report:
        assert entry["agreement"] == 1.0 and entry["reference_agreement"] == 1.0
        meta = json.loads((out / f"client{entry['client']}" / "assigner.json").read_text())
        assert meta["input"]["columns"] == ["mcg", "gvh", "lip", "chg", "aac", "alm1", "alm2"]
        assert len(meta["encoding"]["mean"]) == 7 and meta["output"]["dtype"] == "int32"
        assert set(meta["ops"]) <= OPS and meta["clusters"] == 3
        assert (out / entry["path"]).stat().st_size == entry["bytes"]
    assert (out / "export_report.md").exists()


@pytest.mark.slow
def test_fedhire_on_overlapping_blobs_keeps_the_runs_labels(tmp_path, tff_context):
    """Overlapping blobs given in Python: FCPL's clusterlets touch, and both the FCPL and the
    k-means (Table 4) clusterlets label >= 99 % of the run's objects as the run did; other
    arrays than the run's are refused."""
    from fedprune.algorithms.fedhire.experiment import run_fedhire
    from fedprune.data.table_partition import FederatedSplit

    rng = np.random.default_rng(3)
    clients = [
        np.concatenate([rng.normal(c, 0.9, (40, 3)) for c in (0.0, 2.0, 4.0)]) for _ in range(3)
    ]
    table = FederatedSplit.from_clients(clients)
    for method in ("fcpl", "kmeans"):
        config = configs.FedHireConfig(dataset="ecoli", k_star=3, client_method=method)
        run_fedhire(config, tmp_path / method, table=table)
        with pytest.raises(DataError, match="not the objects the run clustered .*client_x"):
            export.load_job(tmp_path / method, client_x=[x + 1.0 for x in clients])
        job = export.load_job(tmp_path / method, client_x=clients)
        entries = export.export_assigners(job, tmp_path / f"out-{method}", progress=False)
        same = sum(e["objects"] - e["differing_objects"] for e in entries)
        assert same >= 0.99 * sum(e["objects"] for e in entries)
        assert read_assigner(tmp_path / method).mean is None  # given tables: no encoding


def _error(capsys, args: list[str]) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("edge-export: error: ")
    return err[0]


@pytest.mark.slow
def test_the_error_lines(runs, tmp_path, capsys):
    run = runs / "kfed"
    out = tmp_path / "out"
    base = [str(run), "--out", str(out), "--data-dir", str(runs)]
    line = _error(capsys, [*base, "--formats", "float32,int8"])
    assert "float32 only" in line and "--formats float32" in line
    assert "--micro" in _error(capsys, [*base, "--micro"])
    assert "its clients are 0..2" in _error(capsys, [*base, "--clients", "5"])
    assert not out.exists()
    older = tmp_path / "older"  # a run of a version without the assigner
    older.mkdir()
    for name in (names.CONFIG, names.LABELS, names.METRICS):
        (older / name).write_bytes((run / name).read_bytes())
    summary = json.loads((run / names.SUMMARY).read_text())
    del summary["deploy"]
    (older / names.SUMMARY).write_text(json.dumps(summary))
    line = _error(capsys, [str(older), "--out", str(out)])
    assert "kfed run holds config.json, labels.npz, metrics.csv, summary.json" in line
    assert "no assigner.npz" in line and "train it again with this version" in line
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    for name in (names.CONFIG, names.LABELS, names.SUMMARY):
        (damaged / name).write_bytes((run / name).read_bytes())
    arrays = dict(np.load(run / names.ASSIGNER))
    arrays["clusters0"] = arrays["clusters0"] + 10  # clusters beyond k*
    np.savez(damaged / names.ASSIGNER, **arrays)
    line = _error(capsys, [str(damaged), "--out", str(out), "--data-dir", str(runs)])
    assert "assigner.npz is damaged" in line and "outside 0..2" in line
    (damaged / names.ASSIGNER).unlink()
    assert "assigner.npz is missing" in _error(capsys, [str(damaged), "--out", str(out)])
    assert not out.exists()


def test_the_float64_reference_is_the_runs_rule_for_k_means_centres():
    """k-means labels are the nearest centres: the reference of a k-means assigner is the
    nearest centre, whatever the encoding."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(4, 3))
    raw = rng.normal(size=(50, 3)) * 3 + 1
    a = Assigner("fedkmeans", "gaussian", 4, [ClientAssigner(centres, np.arange(4))])
    a = dataclasses.replace(a, mean=np.ones(3), scale=np.full(3, 3.0))
    z = (raw - 1) / 3
    nearest = np.argmin(((z[:, None] - centres[None]) ** 2).sum(-1), axis=1)
    np.testing.assert_array_equal(a.assign(0, raw), nearest)


@pytest.mark.parametrize("update", ["sequential", "batch"])
def test_recording_the_factors_changes_no_result_and_averages_the_last_epoch(update):
    from fedprune.algorithms.fedhire import cpl

    rng = np.random.default_rng(1)
    x = np.concatenate([rng.normal(c, 0.6, (30, 2)) for c in (0.0, 2.0, 4.0)])
    params = cpl.CplParams(update=update)
    plain = cpl.competitive_penalized_learning(x, np.random.default_rng(2), params)
    traced = cpl.competitive_penalized_learning(
        x, np.random.default_rng(2), params, record_factors=True
    )
    np.testing.assert_array_equal(plain.labels, traced.labels)
    np.testing.assert_array_equal(plain.centroids, traced.centroids)
    assert plain.log_factors is None and traced.log_factors.shape == (traced.k,)
    assert np.all(traced.log_factors <= 0)  # ln(γ w) with γ, w <= 1
    # the compiled epoch's mean ln(γ w) equals a replay by hand
    sim = rng.uniform(0.1, 1.0, (20, 3))
    w_raw, wins = np.array([1.0, 0.8, 0.6]), np.array([5.0, 3.0, 2.0])
    got = np.zeros(3)
    cpl._sequential_epoch(sim, sim, w_raw.copy(), wins.copy(), 1.0, 0.05, 5.0, False, got)
    w, g, total, seen = w_raw.copy(), wins.copy(), wins.sum() + 1.0, []
    for row in sim:
        factor = (1 - g / total) * cpl.sigmoid_weight(w, 5.0)
        seen.append(np.log(factor))
        score = factor * row
        v = int(np.argmax(score))
        r = int(np.argmax(np.where(np.arange(3) == v, -np.inf, score)))
        w[v] += 0.05
        w[r] -= 0.05 * row[r] / row[v]
        g[v] += 1
        total += 1
    np.testing.assert_allclose(got, np.mean(seen, axis=0), rtol=1e-12)
