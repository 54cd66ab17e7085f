"""FedCRef on your own unlabeled vectors (a table ``.npz``: x, client_id, optional y) and with
your own autoencoder: runs with and without classes, and the inputs refused before any
directory is made."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from fedprune.algorithms.fedcref.experiment import run_fedcref_experiment, summary_line
from fedprune.configs.fedcref import FedCRefRunConfig
from fedprune.data.tables import ClientTable, from_table, write_table_npz
from fedprune.errors import ConfigError, DataError
from fedprune.models.user import UserModel

DIM = 16
# which of the 3 blobs each of the 4 clients holds
HOLDINGS = ((0, 1), (1, 2), (0, 2), (0, 1, 2))
FAST = dict(local_epochs=3, fl_rounds=2, max_iterations=2, batch_size=8, theta=0.3)


def blob_table(per_class: int = 12, seed: int = 0, classes: bool = True) -> ClientTable:
    """3 well-separated blobs in [0, 1]^16 (blob c is high on features 5c .. 5c+4), spread
    over 4 clients as :data:`HOLDINGS` says."""
    rng = np.random.default_rng(seed)
    xs, ys, ids = [], [], []
    for client, held in enumerate(HOLDINGS):
        for c in held:
            centre = np.full(DIM, 0.1)
            centre[5 * c : 5 * c + 5] = 0.9
            xs.append(np.clip(centre + rng.normal(0, 0.05, (per_class, DIM)), 0, 1))
            ys.append(np.full(per_class, c))
            ids.append(np.full(per_class, 10 + client))  # ids need not be 0 .. N-1
    y = np.concatenate(ys) if classes else None
    return from_table(np.concatenate(xs), np.concatenate(ids), y, name="blobs")


def write_blobs(path, classes: bool = True):
    return write_table_npz(blob_table(classes=classes), path)


def metrics(run) -> list[dict]:
    with open(run / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_own_table_with_classes_runs_and_is_scored(tmp_path, tff_context):
    data = write_table_npz(blob_table(per_class=30), tmp_path / "blobs.npz")
    # long enough local training for the same blob's clusters to be associated
    config = FedCRefRunConfig(dataset=str(data), **{**FAST, "local_epochs": 20, "theta": 0.5})
    assert config.init == "kmeans-ae"  # the default for your own file
    summary = run_fedcref_experiment(config, tmp_path / "run", progress=False)
    run = tmp_path / "run"
    for name in ("community_models.npz", "assignments.npz", "metrics.csv", "summary.json"):
        assert (run / name).exists(), name
    assert summary["num_clients"] == 4 and summary["client_ids"] == [10, 11, 12, 13]
    assert summary["true_categories"] == 3 and summary["mean_k"] == pytest.approx(9 / 4)
    assert summary["acc_init"] >= 0.9 and summary["acc_final"] >= 0.9
    assert summary["communities"] >= 1 and summary["wrong_assoc_pct"] == 0.0
    assert "split" not in summary
    rows = metrics(run)
    assert summary["acc_final"] == float(rows[-1]["acc"])
    assert summary["wrong_assoc_pct"] == float(rows[-1]["wrong_assoc_pct"])
    recorded = json.loads((run / "config.json").read_text())
    assert len(recorded["dataset_sha256"]) == 64
    assert "local_k" not in recorded and "model" not in recorded
    assignments = np.load(run / "assignments.npz")
    assert [len(assignments[f"client{i}"]) for i in range(4)] == [60, 60, 60, 90]
    deploy = summary["deploy"]
    assert deploy["data"] == {
        "loader": "table",
        "dataset": str(data),
        "sha256": recorded["dataset_sha256"],
    }
    assert (deploy["model"], deploy["input_shape"]) == ("autoencoder", [DIM])
    assert summary_line(summary).startswith("ACC ")
    # finished: returned as it is; the same path with other bytes is another run
    assert run_fedcref_experiment(config, run, progress=False) == summary
    write_table_npz(blob_table(seed=1), data)
    with pytest.raises(DataError, match="SHA-256"):
        run_fedcref_experiment(config, run, progress=False)


@pytest.mark.slow
def test_own_table_without_classes_needs_local_k_and_reports_no_scores(tmp_path, tff_context):
    data = write_blobs(tmp_path / "blobs.npz", classes=False)
    config = FedCRefRunConfig(dataset=str(data), local_k=2, **FAST)
    summary = run_fedcref_experiment(config, tmp_path / "run", progress=False)
    run = tmp_path / "run"
    for name in ("community_models.npz", "assignments.npz", "metrics.csv", "summary.json"):
        assert (run / name).exists(), name
    for key in ("acc_init", "acc_final", "true_categories", "wrong_assoc_pct"):
        assert key not in summary
    rows = metrics(run)
    assert rows and not {"acc", "wrong_assoc_pct", "true_categories"} & set(rows[0])
    assert int(rows[-1]["iteration"]) == summary["iterations"] >= 1
    assert summary["mean_k"] == 2.0 and summary["clusters_total"] <= 8
    assert json.loads((run / "config.json").read_text())["local_k"] == 2
    assignments = np.load(run / "assignments.npz")
    assert all(set(np.unique(assignments[k])) <= {0, 1} for k in assignments.files)
    assert summary_line(summary).startswith("communities ")


def tiny_autoencoder(input_dim):
    import tensorflow as tf

    inputs = tf.keras.Input(shape=(input_dim,))
    h = tf.keras.layers.Dense(8, activation="relu", name="enc")(inputs)
    code = tf.keras.layers.Dense(3, activation="relu", name="code")(h)
    h = tf.keras.layers.Dense(8, activation="relu", name="dec")(code)
    return tf.keras.Model(inputs, tf.keras.layers.Dense(input_dim, name="out")(h))


@pytest.mark.slow
def test_own_autoencoder_on_an_in_memory_table(tmp_path, tff_context):
    from fedprune.algorithms.fedcref.local_models import LocalTrainer, code_layer

    user = UserModel(tiny_autoencoder, "tiny")
    trainer = LocalTrainer(DIM, epochs=1, model=user)
    assert code_layer(trainer.model).name == "code"
    x = blob_table().x[:5]
    weights = trainer.fit(x, seed=3)
    np.testing.assert_array_equal(weights[0], trainer.fit(x, seed=3)[0])  # seeded
    assert trainer.encode(weights, x).shape == (5, 3)
    assert trainer.errors(weights, x).shape == (5,)

    # standardized features (outside [0, 1]): fine for a model with a linear output
    table = blob_table(classes=False)
    table = from_table((table.x - table.x.mean(0)) / table.x.std(0), table.client)
    # theta = 1 associates every pair: the communities are trained with your model too
    config = FedCRefRunConfig(
        dataset=str(tmp_path / "given.npz"),
        local_k=2,
        model=user.recorded,
        **{**FAST, "theta": 1.0},
    )
    run = tmp_path / "run"
    summary = run_fedcref_experiment(config, run, progress=False, table=table, model=user)
    assert (run / "model.json").exists() and (run / "community_models.npz").exists()
    assert summary["deploy"]["model"] == "user:tiny" and "acc_final" not in summary
    assert summary["communities"] >= 1
    models = np.load(run / "community_models.npz")
    assert models["c0_0"].shape == (DIM, 8)  # your model's first kernel
    recorded = json.loads((run / "config.json").read_text())
    assert recorded["model"] == "user:tiny" and "dataset_sha256" not in recorded
    # finished: returned without the model function
    assert run_fedcref_experiment(config, run, progress=False, table=table) == summary


def test_bad_inputs_are_refused_before_any_directory(tmp_path):
    unlabeled = write_blobs(tmp_path / "unlabeled.npz", classes=False)
    out = tmp_path / "run"
    with pytest.raises(ConfigError, match="pass --local-k K"):
        run_fedcref_experiment(FedCRefRunConfig(dataset=str(unlabeled)), out, progress=False)
    with pytest.raises(ConfigError, match="--init dirty .* use --init kmeans-ae"):
        run_fedcref_experiment(
            FedCRefRunConfig(dataset=str(unlabeled), init="dirty"), out, progress=False
        )

    def wrong_shape(input_dim):
        import tensorflow as tf

        inputs = tf.keras.Input(shape=(input_dim,))
        return tf.keras.Model(inputs, tf.keras.layers.Dense(input_dim - 1)(inputs))

    user = UserModel(wrong_shape)
    config = FedCRefRunConfig(dataset=str(unlabeled), local_k=2, model=user.recorded)
    with pytest.raises(ConfigError, match=r"output shape .* reconstructs its input, \(16,\)"):
        run_fedcref_experiment(config, out, progress=False, model=user)
    with pytest.raises(ConfigError, match="names model 'autoencoder'"):
        run_fedcref_experiment(
            FedCRefRunConfig(dataset=str(unlabeled), local_k=2), out, progress=False, model=user
        )
    table = blob_table()
    wide = write_table_npz(from_table(table.x * 2, table.client, table.y), tmp_path / "w.npz")
    with pytest.raises(DataError, match=r"scale your features to \[0, 1\]"):
        run_fedcref_experiment(FedCRefRunConfig(dataset=str(wide)), out, progress=False)
    with pytest.raises(ConfigError, match="client 10 .* holds 24 vectors, fewer than its K_i = 25"):
        run_fedcref_experiment(
            FedCRefRunConfig(dataset=str(unlabeled), local_k=25), out, progress=False
        )
    one = write_table_npz(from_table(table.x[:4], [7] * 4), tmp_path / "one.npz")
    with pytest.raises(ConfigError, match="at least 2 clients"):
        run_fedcref_experiment(FedCRefRunConfig(dataset=str(one), local_k=2), out, progress=False)
    with pytest.raises(ConfigError, match="a table was given"):
        run_fedcref_experiment(FedCRefRunConfig(), out, progress=False, table=table)
    assert not out.exists()


def test_options_of_your_own_file():
    mine = FedCRefRunConfig(dataset="mine.npz", local_k=3, num_clients=1, samples_per_class=0)
    assert mine.init == "kmeans-ae"  # the simulation's options are not used, nor checked
    assert {"split", "num_clients", "samples_per_class", "overlap", "max_classes"} <= (
        mine.unused_fields()
    )
    assert "local_k" not in mine.unused_fields() and mine.recorded()["local_k"] == 3
    dirty = FedCRefRunConfig(dataset="mine.npz", init="dirty", local_k=3)
    assert "local_k" in dirty.unused_fields() and "local_k" not in dirty.recorded()
    # the built-in datasets: --local-k unused and never recorded; the paper's start
    builtin = FedCRefRunConfig(local_k=3)
    assert builtin.init == "dirty" and "local_k" in builtin.unused_fields()
    assert builtin.recorded() == FedCRefRunConfig().recorded()
    with pytest.raises(ConfigError, match="--local-k must be an integer >= 2"):
        FedCRefRunConfig(dataset="mine.npz", local_k=1)
    with pytest.raises(ConfigError, match="--model must be autoencoder"):
        FedCRefRunConfig(model="image_cnn")
    with pytest.raises(ConfigError, match="the path of your own .npz table"):
        FedCRefRunConfig(dataset="mine.csv")


def test_command_line_refuses_unused_options():
    import argparse

    from fedprune.configs.command_line import add_config_options, config_from_options

    parser = argparse.ArgumentParser()
    add_config_options(parser, FedCRefRunConfig)

    def build(*argv):
        return config_from_options(FedCRefRunConfig, parser.parse_args(argv), "train fedcref")

    assert build("--dataset", "x.npz", "--local-k", "4").local_k == 4
    assert "--local-k LOCAL_K" in parser.format_help()
    with pytest.raises(ConfigError, match="--local-k: not used"):
        build("--local-k", "3")
    with pytest.raises(ConfigError, match="--clients: not used"):
        build("--dataset", "x.npz", "--clients", "3")
    with pytest.raises(ConfigError, match="--dirtiness: not used"):
        build("--dataset", "x.npz", "--dirtiness", "0.1")
