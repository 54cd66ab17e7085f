"""FedCRef's ``--local-k auto`` (:mod:`fedprune.algorithms.fedcref.local_k`): each client's
K_i chosen from its own data by the silhouette rule; the choice on points with known clusters,
the record, the configuration, resume, and the inputs refused before any directory is made."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from fedprune.algorithms.fedcref.experiment import run_fedcref_experiment
from fedprune.algorithms.fedcref.initial import kmeans_labels, kmeans_on_embeddings
from fedprune.algorithms.fedcref.local_k import (
    LOCAL_K,
    check_choosable,
    choose_from_data,
    choose_local_k,
    comparison,
    local_k_record,
    read_local_k,
    write_local_k,
)
from fedprune.configs.command_line import add_config_options, config_from_options
from fedprune.configs.fedcref import DEFAULT_MAX_LOCAL_K, FedCRefRunConfig
from fedprune.data import images
from fedprune.data.tables import from_table, write_table_npz
from fedprune.errors import ConfigError, DataError
from tests.algorithms.test_fedcref_run import pattern_images
from tests.conftest import interrupted
from tests.data.test_images import write_idx_pair

DIM = 16
# the blobs each client of the toy table holds: K_i = 2, 3, 2, 4
HOLDINGS = ((0, 1), (1, 2, 3), (0, 2), (0, 1, 2, 3))
FAST = dict(local_epochs=3, fl_rounds=2, max_iterations=2, batch_size=8, theta=0.3)


def blobs(k: int, per: int = 30, seed: int = 0) -> np.ndarray:
    """``k`` tight, well-apart blobs of ``per`` points in [0, 1]^16 (blob c high on features
    4c .. 4c+3)."""
    rng = np.random.default_rng(seed)
    parts = []
    for c in range(k):
        centre = np.full(DIM, 0.1)
        centre[4 * c : 4 * c + 4] = 0.9
        parts.append(np.clip(centre + rng.normal(0, 0.05, (per, DIM)), 0, 1))
    return np.concatenate(parts).astype(np.float32)


def blob_table(per: int = 30, seed: int = 0, classes: bool = True):
    """The clients of :data:`HOLDINGS` (ids 10 ..), each blob ``per`` points."""
    rng = np.random.default_rng(seed)
    xs, ys, ids = [], [], []
    for client, held in enumerate(HOLDINGS):
        for c in held:
            centre = np.full(DIM, 0.1)
            centre[4 * c : 4 * c + 4] = 0.9
            xs.append(np.clip(centre + rng.normal(0, 0.05, (per, DIM)), 0, 1))
            ys.append(np.full(per, c))
            ids.append(np.full(per, 10 + client))
    y = np.concatenate(ys) if classes else None
    return from_table(np.concatenate(xs), np.concatenate(ids), y, name="blobs")


# --- the rule on points with known clusters (the points are the codes) ------------------------


@pytest.mark.parametrize("k", [2, 3, 4])
def test_known_clusters_give_their_number(k):
    codes = blobs(k)
    choice, labels = choose_local_k(codes, max_local_k=6, seed=3)
    assert choice.chosen == k and choice.samples == len(codes) and choice.max_local_k == 6
    assert sorted(choice.silhouettes) == [2, 3, 4, 5, 6]
    assert max(choice.silhouettes, key=choice.silhouettes.get) == k
    # the initial clustering is the chosen K's k-means, as --init kmeans-ae gives it
    np.testing.assert_array_equal(labels, kmeans_labels(codes, k, 3))
    assert labels.dtype == np.int64 and np.unique(labels).size == k


def test_the_same_seed_chooses_the_same():
    codes = blobs(3) + np.random.default_rng(1).normal(0, 0.2, (90, DIM)).astype(np.float32)
    a, la = choose_local_k(codes, 5, seed=7)
    b, lb = choose_local_k(codes, 5, seed=7)
    assert a == b
    np.testing.assert_array_equal(la, lb)


def test_a_k_k_means_cannot_form_is_not_scored():
    codes = np.repeat(np.eye(3, DIM, dtype=np.float32), 5, axis=0)  # 3 distinct points
    choice, _ = choose_local_k(codes, 5, seed=0)
    assert choice.chosen == 3 and sorted(choice.silhouettes) == [2, 3]
    assert choice.record()["silhouette"] == {
        "2": pytest.approx(choice.silhouettes[2]),
        "3": 1.0,
        "4": None,
        "5": None,
    }
    with pytest.raises(DataError, match="client 4: its codes take too few distinct values"):
        choose_local_k(np.zeros((6, 2), np.float32), 3, seed=0, name="client 4")


def test_choice_through_the_autoencoder_codes():
    from fedprune.algorithms.fedcref.local_models import LocalTrainer

    trainer = LocalTrainer(DIM, epochs=3, batch_size=8)
    x = blobs(3)
    choice, labels = choose_from_data(x, 5, trainer, seed=2)
    assert choice.chosen == 3
    np.testing.assert_array_equal(labels, kmeans_on_embeddings(x, 3, trainer, 2))


# --- the record -----------------------------------------------------------------------------


def test_record_and_comparison(tmp_path):
    choices = [choose_local_k(blobs(k), 4, seed=0)[0] for k in (2, 3, 4)]
    record = local_k_record(choices, classes=[2, 4, 4], client_ids=[7, 8, 9])
    assert record["chosen"] == [2, 3, 4] and record["mean"] == 3.0
    assert record["max_local_k"] == 4 and record["classes"] == [2, 4, 4]
    assert record["mean_abs_diff"] == pytest.approx(1 / 3) and record["exact_fraction"] == (
        pytest.approx(2 / 3)
    )
    first = record["clients"][0]
    assert (first["client"], first["client_id"], first["classes"], first["chosen"]) == (0, 7, 2, 2)
    assert set(first["silhouette"]) == {"2", "3", "4"} and first["samples"] == 60
    assert comparison([3], [3]) == {"mean_abs_diff": 0.0, "exact_fraction": 1.0}
    unlabeled = local_k_record(choices)
    assert "classes" not in unlabeled and "mean_abs_diff" not in unlabeled
    assert "client_id" not in unlabeled["clients"][0]

    assert read_local_k(tmp_path, 3, 4) is None  # not written yet
    write_local_k(tmp_path, record)
    assert read_local_k(tmp_path, 3, 4) == [2, 3, 4]
    assert json.loads((tmp_path / LOCAL_K).read_text()) == record
    with pytest.raises(DataError, match="not 4 integers K_i in 2..4"):
        read_local_k(tmp_path, 4, 4)
    with pytest.raises(DataError, match="not 3 integers K_i in 2..3"):
        read_local_k(tmp_path, 3, 3)


# --- the configuration ------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_config_options(p, FedCRefRunConfig)
    return p


def build(*argv):
    return config_from_options(FedCRefRunConfig, parser().parse_args(argv), "train fedcref")


def test_configuration_of_auto():
    builtin = FedCRefRunConfig(local_k="auto")
    assert builtin.init == "kmeans-ae"  # the k-means start is the default with auto
    assert builtin.max_local_k == DEFAULT_MAX_LOCAL_K == 10
    recorded = builtin.recorded()
    assert (recorded["local_k"], recorded["max_local_k"], recorded["init"]) == (
        "auto",
        10,
        "kmeans-ae",
    )
    assert "dirtiness" in builtin.unused_fields()  # the k-means start has no dirtiness
    # without auto, nothing new is recorded (older run directories still match)
    assert "max_local_k" not in FedCRefRunConfig().recorded()
    assert "max_local_k" not in FedCRefRunConfig(dataset="m.npz", local_k=3).recorded()
    assert "max_local_k" in FedCRefRunConfig(local_k=3).unused_fields()
    mine = FedCRefRunConfig(dataset="m.npz", local_k="auto", max_local_k=4)
    assert mine.system().max_local_k == 4 and mine.recorded()["max_local_k"] == 4

    assert build("--local-k", "auto").local_k == "auto"
    assert build("--local-k", "auto", "--max-local-k", "5").max_local_k == 5
    assert build("--dataset", "m.npz", "--local-k", "3").local_k == 3
    assert "--max-local-k K" in parser().format_help()


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(local_k="auto", max_local_k=1), "--max-local-k must be an integer >= 2, got 1"),
        (dict(local_k="auto", init="dirty"), "--local-k auto chooses .* use --init kmeans-ae"),
        (dict(dataset="m.npz", local_k="auto", init="dirty"), "use --init kmeans-ae"),
        (dict(dataset="m.npz", local_k="many"), "--local-k must be an integer >= 2 or auto"),
        (dict(dataset="m.npz", local_k=1), "--local-k must be an integer >= 2, got 1"),
    ],
)
def test_bad_configurations_are_one_line(change, message):
    with pytest.raises(ConfigError, match=message):
        FedCRefRunConfig(**change)


def test_command_line_refuses_what_auto_does_not_use(capsys):
    with pytest.raises(ConfigError, match="--max-local-k: not used"):
        build("--max-local-k", "5")
    with pytest.raises(ConfigError, match="--max-local-k: not used"):
        build("--dataset", "m.npz", "--local-k", "3", "--max-local-k", "5")
    with pytest.raises(ConfigError, match="--dirtiness: not used"):
        build("--local-k", "auto", "--dirtiness", "0.3")
    with pytest.raises(SystemExit):
        parser().parse_args(["--local-k", "several"])
    assert "expected an integer K >= 2 or auto, got 'several'" in capsys.readouterr().err


# --- refused before any directory is made -----------------------------------------------------


def test_check_choosable_names_the_client():
    check_choosable([11, 40], 10, ["a", "b"])
    with pytest.raises(ConfigError, match="--max-local-k must be an integer >= 2, got 1"):
        check_choosable([40], 1, ["a"])
    with pytest.raises(
        ConfigError, match=r"client 3 holds 6 samples, .* needs at least 11; pass --max-local-k 5"
    ):
        check_choosable([40, 6], 10, ["client 2", "client 3"])
    with pytest.raises(ConfigError, match="holds 2 samples, .* give it at least 3 samples"):
        check_choosable([2], 2, ["client 0"])


@pytest.fixture
def mnist_dir(tmp_path):
    x, y = pattern_images()
    write_idx_pair(tmp_path / "mnist", images.file_names("mnist", "train"), x, y)
    return tmp_path


def test_too_few_samples_are_refused_before_any_directory(tmp_path, mnist_dir):
    data = write_table_npz(blob_table(per=5), tmp_path / "blobs.npz")  # client 10: 10 vectors
    out = tmp_path / "run"
    config = FedCRefRunConfig(dataset=str(data), local_k="auto", max_local_k=12)
    with pytest.raises(
        ConfigError,
        match=r"^client 10 of blobs\.npz holds 10 samples, but --local-k auto scores K = "
        r"2\.\.12 by the silhouette, which needs at least 13; pass --max-local-k 9 or less$",
    ):
        run_fedcref_experiment(config, out, progress=False)
    # the simulated system: 4 clients of 2 images per class hold 4 to 6 images
    builtin = FedCRefRunConfig(num_clients=4, samples_per_class=2, local_k="auto")
    with pytest.raises(ConfigError, match="client 0 of the simulated system holds"):
        run_fedcref_experiment(builtin, out, mnist_dir, progress=False)
    assert not out.exists()


# --- end to end -------------------------------------------------------------------------------


@pytest.mark.slow
def test_own_table_chooses_the_known_k_records_and_resumes(tmp_path, tff_context, monkeypatch):
    data = write_table_npz(blob_table(), tmp_path / "blobs.npz")
    config = FedCRefRunConfig(dataset=str(data), local_k="auto", max_local_k=6, **FAST)
    run = tmp_path / "a"
    summary = run_fedcref_experiment(config, run, progress=False)
    assert summary["local_k_chosen"] == [2, 3, 2, 4]  # the blobs each client holds
    assert summary["mean_k"] == pytest.approx(11 / 4)
    assert summary["local_k_mean_abs_diff"] == 0.0 and summary["local_k_exact_fraction"] == 1.0
    assert summary["clusters_total"] <= 11
    record = json.loads((run / LOCAL_K).read_text())
    assert record["chosen"] == [2, 3, 2, 4] and record["classes"] == [2, 3, 2, 4]
    assert [c["client_id"] for c in record["clients"]] == [10, 11, 12, 13]
    assert record["max_local_k"] == 6
    recorded = json.loads((run / "config.json").read_text())
    assert (recorded["local_k"], recorded["max_local_k"]) == ("auto", 6)
    assignments = np.load(run / "assignments.npz")
    assert all(np.unique(assignments[f"client{i}"]).size <= k for i, k in enumerate([2, 3, 2, 4]))

    # interrupted after iteration 1 (its checkpoint holds the stop decision when it was the
    # last): the same seed chooses the same K_i, and the resumed run reads them from
    # local_k.json. (The silhouettes agree to a few hundredths only: the autoencoder fits of
    # run b follow run a's community training in this process, which set TensorFlow's global
    # seed and so the shuffle order; a command-line run and its resumption each start in a
    # fresh process.)
    from fedprune.algorithms.fedcref import clients

    def resume():
        return run_fedcref_experiment(config, tmp_path / "b", progress=False)

    interrupted(monkeypatch, resume, after_round=1)
    again = json.loads((tmp_path / "b" / LOCAL_K).read_text())
    assert again["chosen"] == record["chosen"] and again["classes"] == record["classes"]
    for a, b in zip(record["clients"], again["clients"], strict=True):
        assert b["silhouette"] == pytest.approx(a["silhouette"], abs=0.05)
    assert (tmp_path / "b" / "checkpoint.npz").exists()

    def no_second_choice(*args, **kwargs):
        raise AssertionError("a resumed run chose K_i again")

    monkeypatch.setattr(clients, "choose_local_ks", no_second_choice)
    resumed = resume()
    assert (
        resumed["iterations"] == summary["iterations"]
        and not (tmp_path / "b" / "checkpoint.npz").exists()
    )
    for key in ("local_k_chosen", "mean_k", "local_k_mean_abs_diff", "local_k_exact_fraction"):
        assert resumed[key] == summary[key], key
    assert json.loads((tmp_path / "b" / LOCAL_K).read_text()) == again  # left as it was


@pytest.mark.slow
def test_builtin_dataset_replaces_the_class_count(tmp_path, mnist_dir, tff_context):
    config = FedCRefRunConfig(
        num_clients=4, samples_per_class=10, local_k="auto", max_local_k=6, **FAST
    )
    summary = run_fedcref_experiment(config, tmp_path / "run", mnist_dir, progress=False)
    record = json.loads((tmp_path / "run" / LOCAL_K).read_text())
    assert summary["init"] == "kmeans-ae" and summary["dirtiness"] is None
    assert summary["local_k_chosen"] == record["chosen"]
    assert all(2 <= k <= 6 for k in record["chosen"]) and len(record["chosen"]) == 4
    assert "client_id" not in record["clients"][0]
    # the band images are well apart: every client finds its number of classes
    assert record["chosen"] == record["classes"] and record["exact_fraction"] == 1.0
    assert summary["local_k_exact_fraction"] == 1.0
    assert summary["mean_k"] == pytest.approx(np.mean(record["classes"]))
