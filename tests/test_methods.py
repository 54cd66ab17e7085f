"""The method registry: every method is complete, its help renders every option, and
``--help`` loads no TensorFlow."""

import dataclasses
import importlib
import inspect
import re
import subprocess
import sys

import pytest

from fedprune.cli import build_parser
from fedprune.configs.command_line import usable_fields
from fedprune.configs.fields import Config, cli_fields, flag_of
from fedprune.errors import ConfigError
from fedprune.methods import METHODS, method

PAPER_METHODS = {
    "fedavg",
    "caafp",
    "global_ft",
    "fedchar",
    "efficientfl",
    "fedsnip",
    "clusterfl",
    "fedcref",
    "ascfl",
    "cfl",
    "cfl-fixed",
    "ifca",
    "fedhire",
    "kfed",
    "fedkmeans",
}


def test_every_method_is_registered_with_a_config_and_a_runner_string():
    assert set(METHODS) == PAPER_METHODS
    for name, entry in METHODS.items():
        assert entry.name == name and entry.summary and entry.description
        assert issubclass(entry.config, Config) and dataclasses.is_dataclass(entry.config)
        # the recorded method name is the registry's (config.json says which runner made it)
        assert entry.config.__dataclass_fields__["method"].default == name
        module, function = entry.runner.split(":")
        assert module.startswith("fedprune.algorithms.") and function.isidentifier()


def test_unknown_method_is_one_line():
    with pytest.raises(ConfigError, match="unknown method 'fedprox'; the known methods are"):
        method("fedprox")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PAPER_METHODS))
def test_runner_resolves_with_the_runner_signature(name):
    runner = METHODS[name].run_function()
    assert callable(runner)
    parameters = list(inspect.signature(runner).parameters)
    assert parameters[:4] == ["config", "out", "data_dir", "progress"]
    module = importlib.import_module(METHODS[name].runner.split(":")[0])
    assert getattr(module, METHODS[name].runner.split(":")[1]) is runner


@pytest.mark.slow
def test_every_fine_tuning_method_names_inputs_with_the_expected_signature():
    from fedprune.lazy import resolve

    tuned = {name for name, m in METHODS.items() if m.finetune_start is not None}
    assert tuned == {"caafp", "global_ft", "fedchar", "efficientfl", "fedsnip", "clusterfl"}
    for name in tuned:
        start = resolve(METHODS[name].finetune_start)
        assert list(inspect.signature(start).parameters) == ["run", "data", "spec"], name


@pytest.mark.parametrize("name", sorted(PAPER_METHODS))
def test_help_renders_every_config_option(name, capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["train", name, "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    usable = usable_fields(METHODS[name].config, METHODS[name].data)  # the others: refused
    for field in cli_fields(METHODS[name].config):
        flag = "--" + flag_of(field).replace("_", "-")
        shown = re.search(rf"^  {re.escape(flag)}(?=[ ,\n])", text, re.M) is not None
        assert shown == (field.name in usable), field.name
    for shared in ("--out", "--data-dir", "--workers", "--no-progress", "--verbose"):
        assert shared in text


def test_help_loads_no_tensorflow():
    code = (
        "import sys\n"
        "from fedprune.cli import main\n"
        "for argv in (['--help'], ['train', 'caafp', '--help'], ['train', 'fedcref', '--help']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = [m for m in ('tensorflow', 'tensorflow_federated', 'numpy') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_python_dash_m_is_the_fedprune_command():
    proc = subprocess.run(
        [sys.executable, "-m", "fedprune", "train", "no-such-method"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("fedprune train: error:") and "no-such-method" in last


def test_bad_option_value_is_one_line_before_anything_is_made(tmp_path, capsys):
    from fedprune.cli import main

    out = tmp_path / "run"
    assert (
        main(["train", "global_ft", "--dataset", "uci_har", "--churn", "2", "--out", str(out)]) == 2
    )
    err = capsys.readouterr().err
    assert err.strip() == "fedprune: error: --churn must be in [0, 1], got 2.0"
    assert not out.exists()
