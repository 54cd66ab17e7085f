"""The public builders: one per registered method, options checked before anything runs, your
data and model only where a method takes them; importing the API imports no TensorFlow."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import fedprune as fp
from fedprune.errors import ConfigError, DataError
from fedprune.methods import METHODS


def windows(clients: int = 3, per_client: int = 20, seed: int = 0) -> fp.WindowedDataset:
    rng = np.random.default_rng(seed)
    n = clients * per_client
    y = np.tile(np.arange(2), n // 2)
    x = rng.normal(size=(n, 16, 2)).astype(np.float32) + y[:, None, None]
    return fp.from_arrays(x, y, np.repeat(np.arange(clients), per_client))


def test_every_method_has_its_builder_named_after_it():
    assert set(fp.BUILDERS) == set(METHODS)
    for name, builder in fp.BUILDERS.items():
        assert builder.__name__ == name.replace("-", "_")
        assert getattr(fp, builder.__name__) is builder
        assert f"fedprune train {name}" in builder.__doc__


def test_options_become_the_methods_config():
    trainer = fp.caafp("uci_har", phases=(0, 0, 4), prune_frequency=2, seed=3)
    assert type(trainer.config) is METHODS["caafp"].config
    assert trainer.config.phases == (0, 0, 4) and trainer.config.seed == 3
    assert trainer.config.dataset == "uci_har" and trainer.method.name == "caafp"


def test_config_and_options_combine():
    base = fp.fedavg("wisdm", rounds=7).config
    trainer = fp.fedavg(config=base, seed=5)
    assert (trainer.config.rounds, trainer.config.seed, trainer.config.dataset) == (7, 5, "wisdm")


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: fp.caafp("uci_har", bogus=1), "unknown option.*bogus"),
        (lambda: fp.caafp("uci_har", phases=(0, 0, 0)), "^phases T0,T1,T2 must be"),
        (lambda: fp.caafp(), "give the data"),
        (lambda: fp.caafp("mnist"), "^dataset must be one of"),
        (lambda: fp.caafp(config=fp.kfed("ecoli").config), "takes a CAAFPConfig"),
        (lambda: fp.kfed("ecoli", model_fn=lambda s, k: None), "does not take your own model"),
        (lambda: fp.kfed(windows()), "does not take a WindowedDataset; .*caafp"),
        (lambda: fp.caafp(fp.from_table(np.ones((4, 2)), [0, 0, 1, 1])), "kfed"),
        (lambda: fp.build("nope"), "unknown method 'nope'"),
        (lambda: fp.caafp(windows(), model_fn="not a function"), "model_fn must be a function"),
    ],
)
def test_bad_calls_are_one_named_error(call, message):
    with pytest.raises(ConfigError, match=message):
        call()


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: fp.from_table(np.ones(3), [0, 0, 0]), "shape \\(objects, features\\)"),
        (lambda: fp.from_table([[1.0], [np.nan]], [0, 0]), "x\\[1, 0\\] = nan"),
        (lambda: fp.from_table(np.ones((3, 2)), [0, 0]), "one value per object \\(3\\)"),
        (lambda: fp.from_table(np.ones((3, 2)), [0, 0, 1]), "client 1 holds 1 object"),
        (lambda: fp.from_table(np.ones((2, 2)), [0, 0], [0, -1]), "y\\[1\\] = -1"),
        (lambda: fp.from_table(np.ones((2, 2)), [0.5, 0.5]), "whole numbers"),
    ],
)
def test_bad_tables_are_one_data_error(make, message):
    with pytest.raises(DataError, match=message):
        make()


def test_your_data_sets_the_dataset_and_model_names():
    def tiny(input_shape, num_classes):  # never built here
        raise AssertionError

    trainer = fp.fedavg(windows(), model_fn=tiny, rounds=1)
    assert trainer.config.dataset == "dataset.npz" and trainer.config.model == "user:tiny"
    assert trainer.model.fn is tiny and trainer.data is not None


def test_importing_the_api_imports_no_tensorflow():
    code = "import fedprune as fp, sys; fp.caafp('uci_har'); print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def images(clients: int = 4, per_client: int = 6, seed: int = 0) -> fp.ImageClients:
    rng = np.random.default_rng(seed)
    n = clients * per_client
    x = rng.random((n, 8, 8, 1)).astype(np.float32)
    y = np.tile(np.arange(2), n // 2)
    proxy = (rng.random((4, 8, 8, 1)), np.array([0, 1, 0, 1]))
    return fp.from_images(x, y, np.repeat(np.arange(clients), per_client), proxy=proxy)


def test_your_images_set_the_dataset_and_the_number_of_clients():
    trainer = fp.ifca(images(clients=5), clusters=2, rounds=1)
    assert trainer.config.num_clients == 5 and trainer.config.dataset == "dataset.npz"
    assert "alpha" in trainer.config.unused_fields()  # the partition's options do not apply


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda: fp.from_images(
                np.ones((4, 8, 8)), [0] * 4, [0] * 4, proxy=(np.ones((1, 8, 8)), [0])
            ),
            "add a channel axis",
        ),  # noqa: E501
        (
            lambda: fp.from_images(
                np.ones((4, 8, 8, 1)), [0] * 4, [0, 0, 1, 1], proxy=(np.ones((1, 4, 4, 1)), [0])
            ),
            "proxy_x must hold images shaped like",
        ),  # noqa: E501
        (
            lambda: fp.from_images(
                np.ones((4, 8, 8, 1)), [0] * 4, [0] * 4, proxy=(np.ones((1, 8, 8, 1)), [0])
            ),
            "names 1 client",
        ),  # noqa: E501
        (
            lambda: fp.from_images(
                np.ones((4, 8, 8, 1)),
                [0, 0, 0, 0],
                [0, 0, 0, 1],
                proxy=(np.ones((1, 8, 8, 1)), [0]),
            ),
            "client 1 has fewer than 2",
        ),  # noqa: E501
        (
            lambda: fp.from_images(
                np.ones((4, 8, 8, 1)),
                [0, 0, 5, 0],
                [0, 0, 1, 1],
                proxy=(np.ones((1, 8, 8, 1)), [0]),
                class_names=["a", "b"],
            ),
            "y\\[2\\] = 5 is not a class",
        ),  # noqa: E501
        (
            lambda: fp.from_images(
                np.ones((4, 8, 8, 1)),
                [0] * 4,
                [0, 0, 1, 1],
                proxy=(np.ones((1, 8, 8, 1)), [0]),
                groups=[0],
            ),
            "group must have one value per client \\(2\\)",
        ),  # noqa: E501
    ],
)
def test_bad_images_are_one_data_error(make, message):
    with pytest.raises(DataError, match=message):
        make()


@pytest.mark.slow
def test_an_images_file_with_other_clients_than_clients_is_refused(tmp_path):
    from fedprune.algorithms.ascfl.experiment import run_clustered_images
    from fedprune.configs.ascfl import IFCAConfig

    path = fp.api.trainer.write_images_npz(images(clients=3), tmp_path / "mine.npz")
    config = IFCAConfig(dataset=str(path), num_clients=4, clusters=2, rounds=1)
    with pytest.raises(ConfigError, match="--clients 4 but mine.npz holds 3 clients"):
        run_clustered_images(config, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_more_local_workers_than_usable_cpus_are_refused(monkeypatch):
    from fedprune.workers import local

    monkeypatch.setattr(local, "usable_cpus", lambda: 3)
    assert fp.Workers(local=3).local == 3
    for count in (4, 0):
        with pytest.raises(ConfigError, match=f"Workers.local={count}.: .* 3 usable CPU"):
            fp.Workers(local=count)
    assert fp.Workers(local=0, remote=("host:8000",)).remote == ("host:8000",)


def test_workers_none_is_refused_without_installed_workers(tmp_path):
    """TFF's own default context would start a worker on every interface: never used."""
    from fedprune.workers import execution

    execution.shutdown()  # whatever an earlier test left
    assert not execution.installed()
    with pytest.raises(ConfigError, match="workers=None runs on the TFF workers you started"):
        fp.kfed(fp.from_table(np.ones((4, 2)), [0, 0, 1, 1]), k_star=2).run(
            tmp_path / "run", workers=None
        )
    assert not (tmp_path / "run").exists()
