"""``--clusters auto`` end to end on the fixture data (6 UCI-HAR clients): the chosen K and
how it was chosen land in the run directory, and a resumed run keeps them."""

import dataclasses
import json

import numpy as np
import pytest

from fedprune.algorithms.caafp.choose_k import choose_clusters
from fedprune.algorithms.caafp.clustering import cluster_clients
from fedprune.algorithms.caafp.label_histograms import label_histograms
from fedprune.algorithms.pipeline import run_method
from fedprune.configs.pipeline import CAAFPConfig
from fedprune.data.registry import har_recipe, load_recorded
from fedprune.runs import artefacts
from tests.conftest import interrupted

pytestmark = pytest.mark.slow

AUTO = CAAFPConfig(
    "uci_har",
    phases=(0, 1, 2),  # round 1 clusters, round 2 is Phase 2, rounds 3-4 Phase 3
    clusters="auto",
    max_clusters=4,
    clients_per_round=4,
    local_epochs=1,
    start_sparsity=0.5,
    target_sparsity=0.7,
    prune_frequency=2,
    ft_epochs=(1,),
)


def _files(run):
    return (
        json.loads((run / "summary.json").read_text()),
        artefacts.read_cluster_choice(run),
        artefacts.read_clusters(run),
    )


def test_the_chosen_k_is_recorded_and_kept_on_resume(
    tff_context, tmp_path, fixture_data_dir, monkeypatch
):
    full = run_method(AUTO, tmp_path / "full", fixture_data_dir, progress=False)
    summary, choice, clusters = _files(tmp_path / "full")
    k = summary["clusters_chosen"]
    assert k == choice["chosen"] == len(summary["clusters"]) == len(set(clusters.values()))
    assert sorted(choice["silhouette"]) == [2, 3, 4]  # K = 2..min(4, 6 - 1)
    assert (choice["signal"], choice["distance"], choice["linkage"]) == (
        "update",
        "cosine",
        "average",
    )
    assert choice["max_clusters"] == 4
    best = max(sorted(choice["silhouette"]), key=choice["silhouette"].get)
    reached = choice["silhouette"][best] >= choice["min_silhouette"]
    assert k == (best if reached else 1)
    assert sum(summary["clusters"].values()) == 6
    assert json.loads((tmp_path / "full" / "config.json").read_text())["clusters"] == "auto"

    interrupted(  # right after the clustering round
        monkeypatch,
        lambda: run_method(AUTO, tmp_path / "resumed", fixture_data_dir, progress=False),
        after_round=1,
    )
    assert not (tmp_path / "resumed" / "cluster_choice.json").exists()
    resumed = run_method(AUTO, tmp_path / "resumed", fixture_data_dir, progress=False)
    assert _files(tmp_path / "resumed")[1:] == (choice, clusters)
    for key in ("finetune", "sparsity", "comm_mb_eq13", "clusters", "clusters_chosen"):
        assert resumed[key] == full[key], key
    # a finished run answers with its summary: nothing is chosen again
    assert run_method(AUTO, tmp_path / "resumed", fixture_data_dir, progress=False) == resumed


def test_label_histograms_of_one_class_clients(tff_context, tmp_path, fixture_data_dir):
    config = dataclasses.replace(
        AUTO,
        phases=(0, 1, 0),  # dense: the clustering and one cluster round
        cluster_signal="labels",
        classes_per_client=1,
        max_clusters=5,
        clients_per_round=5,
    )
    summary = run_method(config, tmp_path / "run", fixture_data_dir, progress=False)
    choice = artefacts.read_cluster_choice(tmp_path / "run")
    clusters = artefacts.read_clusters(tmp_path / "run")
    settled = json.loads((tmp_path / "run" / "config.json").read_text())
    recipe = har_recipe(dataclasses.replace(config, **_protocol(settled)))
    data = load_recorded(recipe, fixture_data_dir)
    # the run's choice is the rule applied to the clients' label histograms
    assert all(len(np.unique(c.y_train)) == 1 for c in data.clients)  # one class each
    histograms = label_histograms([c.y_train for c in data.clients], 6)
    expected = choose_clusters(histograms, max_clusters=5)
    assert choice["silhouette"] == pytest.approx(expected.silhouettes)
    assert summary["clusters_chosen"] == choice["chosen"] == expected.chosen
    labels = cluster_clients(histograms, expected.chosen).tolist()
    assert [clusters[c.client_id] for c in data.clients] == labels
    assert choice["signal"] == "labels"
    # the clustering upload: 6 classes x 4 bytes per client, no model
    assert summary["comm_mb_eq13_by_kind"]["clustering"] == pytest.approx(6 * 6 * 4 / 1e6)


def _protocol(recorded: dict) -> dict:
    return {k: recorded[k] for k in ("split", "standardize")}


def test_a_noised_upload_is_clustered_and_its_privacy_recorded(
    tff_context, tmp_path, fixture_data_dir
):
    config = dataclasses.replace(
        AUTO,
        phases=(0, 1, 0),
        cluster_signal="labels",
        classes_per_client=1,
        max_clusters=5,
        clients_per_round=5,
        cluster_signal_noise=0.05,
        cluster_signal_clip=1.0,
    )
    summary = run_method(config, tmp_path / "run", fixture_data_dir, progress=False)
    noiseless = run_method(
        dataclasses.replace(config, cluster_signal_noise=0.0, cluster_signal_clip=None),
        tmp_path / "plain",
        fixture_data_dir,
        progress=False,
    )
    assert "cluster_signal_privacy" not in noiseless
    clusters = artefacts.read_clusters(tmp_path / "run")
    assert summary["clusters_chosen"] == len(set(clusters.values()))
    # the same upload, noised: the same clustering traffic
    traffic = [s["comm_mb_eq13_by_kind"]["clustering"] for s in (summary, noiseless)]
    assert traffic[0] == traffic[1] == pytest.approx(6 * 6 * 4 / 1e6)
    privacy = summary["cluster_signal_privacy"]
    assert (privacy["noise_multiplier"], privacy["clip_norm"]) == (0.05, 1.0)
    assert privacy["uploads_per_client"] == 1 and privacy["epsilon"] > 100  # little noise
    # the noised silhouettes differ from the exact ones: the server saw noised histograms
    noisy_choice = artefacts.read_cluster_choice(tmp_path / "run")
    exact_choice = artefacts.read_cluster_choice(tmp_path / "plain")
    assert noisy_choice["silhouette"] != exact_choice["silhouette"]
