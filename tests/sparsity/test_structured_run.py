"""Structured runs end to end (``--structure filters``): the command line and the API give the
same run; its masks remove whole filters and units and reach the target fraction of units at
the last scoring round; the smaller model edge-export converts computes the masked model on
every test window, on the fixture data and (where present) on the real UCI-HAR."""

from __future__ import annotations

import json

import numpy as np
import pytest

import fedprune as fp
from edge_export.cli import main as edge_export
from edge_export.compact import compact, max_difference
from edge_export.run_models import load_run
from fedprune.cli import main
from fedprune.models.cnn1d import build_har_cnn
from fedprune.runs.finished import open_finished
from fedprune.sparsity import structured as S
from fedprune.sparsity.layers import prunable_mask_flags
from tests.conftest import har_arrays, write_uci_har
from tests.test_same_results import _without_timing

pytestmark = pytest.mark.slow

TARGET = 0.5
OPTIONS = dict(
    phases=(0, 0, 4), prune_frequency=2, clusters=2, clients_per_round=3, local_epochs=1,
    ft_epochs=(1,), structure="filters", start_sparsity=0.3, target_sparsity=TARGET,
)  # fmt: skip


def _args(options: dict) -> list[str]:
    args = []
    for key, value in options.items():
        text = ",".join(map(str, value)) if isinstance(value, tuple) else str(value)
        args += [f"--{key.replace('_', '-')}", text]
    return args


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The data directory and one structured CA-AFP run made by the command line and one by
    the API, with the same seed."""
    data_dir = tmp_path_factory.mktemp("data")
    (data_dir / "uci_har").mkdir()
    write_uci_har(data_dir / "uci_har", *har_arrays(6, subjects=tuple(range(1, 7))), as_zip=True)
    root = tmp_path_factory.mktemp("runs")
    args = ["train", "caafp", "--dataset", "uci_har", *_args(OPTIONS), "--seed", "4"]
    assert (
        main([*args, "--data-dir", str(data_dir), "--out", str(root / "cli"), "--no-progress"]) == 0
    )
    trainer = fp.caafp("uci_har", seed=4, **OPTIONS)
    trainer.run(root / "api", data_dir=data_dir, progress=False)
    return data_dir, root / "cli", root / "api"


def _summary(path) -> dict:
    found = _without_timing(json.loads((path / "summary.json").read_text()))
    return {k: v for k, v in found.items() if k != "cpu_s"}


def test_the_command_line_and_the_api_give_the_same_structured_run(runs):
    _, cli, api = runs
    assert json.loads((cli / "config.json").read_text())["structure"] == "filters"
    assert _summary(cli) == _summary(api)
    for name in ("masks.npz", "cluster_models.npz", "personal_ft1.npz"):
        a, b = np.load(cli / name), np.load(api / name)
        assert sorted(a.files) == sorted(b.files)
        assert all(np.array_equal(a[k], b[k]) for k in a.files)


def test_the_masks_remove_whole_filters_and_reach_the_target_in_units(runs):
    _, cli, _ = runs
    masks, _ = open_finished(cli).kernel_masks()
    model = build_har_cnn((128, 9), 6, seed=0)
    graph = S.unit_graph(model, prunable_mask_flags(model))
    summary = json.loads((cli / "summary.json").read_text())
    for cluster, kernels in masks.items():
        keep = S.unit_masks(graph, kernels)
        rebuilt = S.weight_masks(graph, keep)
        assert all(np.array_equal(m > 0, r > 0) for m, r in zip(kernels, rebuilt))
        assert abs(S.unit_sparsity(graph, kernels) - TARGET) <= 0.5 / graph.n_units
        assert summary["unit_sparsity"][str(cluster)] == S.unit_sparsity(graph, kernels)
        assert kernels[-1].any(axis=0).all()  # every class keeps its output
        assert all(k.sum() > 0 for k in keep)
    assert summary["units"] == {"conv1": 64, "conv2": 64, "dense": 32}
    assert "probs" in summary["whole_layers"]


def test_the_payload_sends_one_mask_bit_per_filter_and_unit(runs):
    """Each sparse model transfer costs Eq. 13's bytes plus its mask: 160 bits (20 bytes) for
    the model's filters and units, not one bit per kernel weight (about 11 KB)."""
    _, cli, _ = runs
    summary = json.loads((cli / "summary.json").read_text())
    model = build_har_cnn((128, 9), 6, seed=0)
    graph = S.unit_graph(model, prunable_mask_flags(model))
    unit_bytes = -(-graph.n_units // 8)
    weight_bytes = -(-sum(int(np.prod(s)) for s in graph.shapes) // 8)
    by_kind = summary["comm_mb_payload_by_kind"], summary["comm_mb_eq13_by_kind"]
    mask_bytes = round(1e6 * (by_kind[0]["models"] - by_kind[1]["models"]))
    assert (graph.n_units, unit_bytes) == (160, 20)
    assert 0 < mask_bytes < weight_bytes and mask_bytes % unit_bytes == 0


def _check_compaction(run_dir, data_dir) -> tuple[int, int]:
    """Compare every client's smaller model with its masked one on all its test windows;
    returns the clients and the windows compared."""
    run = load_run(run_dir, data_dir)
    compared = 0
    for client_id in sorted(run.weights):
        masked = run.keras(client_id)
        smaller = compact(masked, run.kernel_masks[client_id])
        x = run.client(client_id).x_test
        assert max_difference(masked, smaller.model, x) <= 1e-5
        assert smaller.params[1] < smaller.params[0]
        compared += len(x)
    return len(run.weights), compared


def test_the_smaller_model_computes_the_masked_one_on_every_test_window(runs):
    data_dir, cli, _ = runs
    clients, windows = _check_compaction(cli, data_dir)
    assert clients == 6 and windows >= 6 * 6  # at least one test window per class and client


def test_every_format_is_converted_from_the_smaller_model(runs, tmp_path):
    import tensorflow as tf

    data_dir, cli, _ = runs
    out = tmp_path / "export"
    args = [str(cli), "--clients", "1", "--formats", "float32,int8", "--out", str(out)]
    assert edge_export([*args, "--data-dir", str(data_dir), "--no-progress"]) == 0
    for fmt in ("float32", "int8"):
        meta = json.loads((out / "client1" / f"{fmt}.json").read_text())
        shapes = meta["compaction"]["kernel_shapes"]
        assert shapes["original"]["dense"] == [2048, 32]
        kept = shapes["compacted"]["dense"]
        assert kept[0] < 2048 and kept[1] < 32 and shapes["compacted"]["probs"] == [kept[1], 6]
        interpreter = tf.lite.Interpreter(model_path=str(out / "client1" / f"{fmt}.tflite"))
        found = {tuple(t["shape"]) for t in interpreter.get_tensor_details()}
        assert (kept[1], kept[0]) in found and (32, 2048) not in found  # TFLite's FC layout


def test_every_pruned_method_runs_structured(runs, tmp_path):
    data_dir, _, _ = runs
    options = dict(phases=(0, 0, 2), clients_per_round=3, local_epochs=1, ft_epochs=(1,))
    result = fp.fedsnip("uci_har", structure="filters", target_sparsity=0.7, **options).run(
        tmp_path / "fedsnip", data_dir=data_dir, progress=False
    )
    assert abs(result.summary["unit_sparsity"]["0"] - 0.7) <= 0.5 / 160
    assert _check_compaction(tmp_path / "fedsnip", data_dir)[0] == 6


@pytest.mark.real_data
def test_on_uci_har_the_smaller_models_compute_the_masked_ones(real_data, tmp_path):
    options = dict(OPTIONS, phases=(0, 0, 2), prune_frequency=1, clients_per_round=4)
    args = ["train", "caafp", "--dataset", "uci_har", *_args(options)]
    assert main([*args, "--data-dir", str(real_data), "--out", str(tmp_path), "--no-progress"]) == 0
    clients, windows = _check_compaction(tmp_path, real_data)
    assert clients == 30 and windows > 2000  # every subject's test windows


def _model_with_a_skip(input_shape, num_classes):
    import tensorflow as tf

    layers = tf.keras.layers
    inputs = tf.keras.Input(input_shape)
    a = layers.Conv1D(8, 5, padding="same", activation="relu", name="a")(inputs)
    b = layers.Conv1D(8, 5, padding="same", activation="relu", name="b")(a)
    h = layers.Flatten()(layers.Add(name="skip")([a, b]))
    outputs = layers.Dense(num_classes, activation="softmax", name="out")(h)
    return tf.keras.Model(inputs, outputs)


def test_your_model_with_an_unsupported_layer_is_one_line_before_anything_is_made(runs, tmp_path):
    from fedprune.errors import ConfigError

    data_dir, _, _ = runs
    trainer = fp.caafp("uci_har", model_fn=_model_with_a_skip, **OPTIONS)
    with pytest.raises(ConfigError) as err:
        trainer.run(tmp_path / "skip", data_dir=data_dir, progress=False)
    assert "'a' feed several layers ('b', 'skip')" in str(err.value)
    assert "\n" not in str(err.value) and not (tmp_path / "skip").exists()
