"""Bad input through the Python API: every ``fedprune train`` row of the command line's table
(:data:`tests.test_bad_input.CASES`) that has a Python equivalent, run as that equivalent
(the builder with the options as keywords, ``Trainer.run(out, data_dir=...)``, a
:class:`fedprune.Workers`), and the API's own rows (:data:`API_CASES`): each is one named
:class:`~fedprune.errors.FedpruneError` whose line is the command's with the Python keywords
in the place of the options (``clients_per_round=2`` for ``--clients-per-round 2``), and
leaves nothing behind.

The Python value of an option is what its text parses to, as the command line parses it; a
text the command line refuses to parse (``--lr fast``, ``--cluster-signal gradients``) is
given as Python would most plausibly be given it (the number it reads as, else the text),
and its line is in :data:`PYTHON_LINES` (the command's is argparse's own).
"""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path

import numpy as np
import pytest

import fedprune as fp
from fedprune.configs.command_line import _value_type
from fedprune.configs.fields import RUN_OPTIONS, cli_fields, flag_of, in_python_terms
from fedprune.errors import ConfigError, DataError, FedpruneError
from fedprune.methods import METHODS
from tests.test_bad_input import CASES, _snapshot, finished_fedavg  # noqa: F401 (a fixture)

pytestmark = pytest.mark.slow

# rows of commands the API has no builder for (fedprune finetune: the CLI's own command)
NOT_TRAIN = sorted(name for name, (_, argv, _) in CASES.items() if argv[0] != "train")

# the Python line where the command line's is argparse's own (it could not parse the text)
PYTHON_LINES = {
    "clusters neither a number nor auto": "clusters must be an integer K >= 1 or auto, got 'many'",
    "cluster signal unknown": "cluster_signal must be one of update, labels, got 'gradients'",
    "structure unknown": "structure must be one of weights, filters, got 'channels'",
    "label noise one value": "label_noise must be a tuple of 2 values, got 0.4",
    "rounds 1e20": "rounds must be an integer >= 1, got 1e+20",
    "local epochs not an integer": "local_epochs must be an integer >= 1, got 1.5",
    "lr not a number": "learning_rate must be a finite number, got 'fast'",
    "phases not integers": "phases T0,T1,T2 must be 3 integers >= 0 and not all 0, got (1, 'x', 0)",
    "ascfl unknown update reference": "update_reference must be one of start, common, got",
    "ascfl unknown epochs rule": "epochs_rule must be one of data_size, uniform, got 'adaptive'",
    "ascfl unknown merge guard": "merge_guard must be one of settled, compact, got 'union'",
    "ascfl unknown stage1": "stage1 must be one of every_round, first_round, got 'never'",
    "ascfl unknown late-clients rule": "late_clients: not used by fp.ascfl with the options",
    "ascfl unknown low-rank layers": "low_rank_layers must be one of output, dense_head, got",
    "ascfl unknown split guard": "split_guard must be one of none, halves, got 'always'",
    "fedcref local-k not an integer": "local_k must be an integer >= 2, got 1000000000000.0",
    "fedcref local-k in capitals": "local_k must be an integer >= 2 or auto, got 'AUTO'",
    "fedcref local-k 2.0": "local_k must be an integer >= 2, got 2.0",
    "workers 0": "Workers(local=0): local TFF workers must be between 1 and this machine's",
    "workers not a number": "Workers(local='two'): expected an integer >= 0",
    "workers beyond the CPUs": "Workers(local=100000): local TFF workers must be between 1",
    "remote-timeout -1": "Workers(remote_timeout=-1.0): must be a positive finite number",
    "remote-timeout nan": "Workers(remote_timeout=nan): must be a positive finite number",
    "remote-timeout inf": "Workers(remote_timeout=inf): must be a positive finite number",
    "remote-worker port 70000": "Workers(remote=...): the port must be in [1, 65535], got",
}
WORKER_OPTIONS = {
    "--workers": "local",
    "--remote-worker": "remote",
    "--remote-timeout": "remote_timeout",
    "--insecure-remote": "insecure_remote",
    "--unsafe-open-workers": "unsafe_open",
}


def _python_value(field: dataclasses.Field, hint: object, text: str) -> object:
    """The value ``text`` of the option of ``field`` stands for in Python: as the command line
    parses it, else the number (or tuple of numbers and words) it reads as, else the text."""
    parse = field.metadata.get("parse") or _value_type(hint)
    try:
        return parse(text)
    except (ValueError, TypeError):
        pass
    words = [_number(t) for t in text.split(",")]
    return tuple(words) if "," in text or typing.get_origin(hint) is tuple else words[0]


def _number(text: str) -> object:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _worker_value(option: str, text: str) -> object:
    if option == "--remote-timeout":
        return float(text)
    if option == "--workers":
        return _number(text)
    return text


@dataclasses.dataclass(frozen=True)
class Call:
    """A ``fedprune train`` command line as the Python call that does the same."""

    method: str
    options: dict
    out: str | None
    data_dir: str | None
    workers: dict

    @classmethod
    def of(cls, argv: list[str]) -> Call:
        method = METHODS[argv[1]]
        hints = typing.get_type_hints(method.config)
        fields = {"--" + flag_of(f).replace("_", "-"): f for f in cli_fields(method.config)}
        options, workers, out, data_dir = {}, {}, None, None
        args = iter(argv[2:])
        for arg in args:
            if arg == "--no-progress":
                continue
            if arg in ("--insecure-remote", "--unsafe-open-workers"):
                workers[WORKER_OPTIONS[arg]] = True
            elif arg in WORKER_OPTIONS:
                value = _worker_value(arg, next(args))
                if arg == "--remote-worker":
                    workers.setdefault("remote", ())
                    workers["remote"] += (value,)
                    workers.setdefault("local", 0)  # as the command: remote workers only
                else:
                    workers[WORKER_OPTIONS[arg]] = value
            elif arg == "--out":
                out = next(args)
            elif arg == "--data-dir":
                data_dir = next(args)
            elif _value_type(hints[fields[arg].name]) is bool:
                options[fields[arg].name] = True
            else:
                field = fields[arg]
                options[field.name] = _python_value(field, hints[field.name], next(args))
        return cls(argv[1], options, out, data_dir, workers)

    def run(self, tmp: Path, default_out: Path, default_data: Path) -> None:
        """Build the trainer and run it, the command line's ``TMP`` being ``tmp``."""
        workers = fp.Workers(**self.workers)
        options = {k: _in(tmp, v) for k, v in self.options.items()}
        data = options.pop("dataset", None)
        trainer = fp.build(self.method, data, **options)
        out = default_out if self.out is None else _in(tmp, self.out)
        data_dir = default_data if self.data_dir is None else _in(tmp, self.data_dir)
        trainer.run(out, data_dir=data_dir, progress=False, workers=workers)


def _in(tmp: Path, value: object) -> object:
    return value.replace("TMP", str(tmp)) if isinstance(value, str) else value


TRAIN = sorted(name for name, (_, argv, _) in CASES.items() if argv[0] == "train")
_FLAG = re.compile(r"--[a-z][a-z0-9-]+")


def _expected(case: str) -> tuple[str, type]:
    """The line the API gives for the command line's row ``case``, and its method's
    configuration class."""
    _, argv, fragment = CASES[case]
    config_class = METHODS[argv[1]].config
    return PYTHON_LINES.get(case, in_python_terms(fragment, config_class)), config_class


def _options_named(message: str, config_class: type) -> list[str]:
    """The command-line options of ``config_class`` (and of ``fedprune train``) ``message``
    names: a Python caller's line names none."""
    flags = {"--" + flag_of(f).replace("_", "-") for f in dataclasses.fields(config_class)}
    return [f for f in _FLAG.findall(message) if f in flags or f in RUN_OPTIONS]


def _one_error(call: typing.Callable[[], object], root: Path) -> FedpruneError:
    """The one named error of ``call``; nothing under ``root`` made or changed."""
    before = _snapshot(root)
    with pytest.raises(FedpruneError) as caught:
        call()
    assert "\n" not in str(caught.value)
    assert _snapshot(root) == before  # nothing made, nothing changed
    return caught.value


def test_every_command_line_row_is_classified():
    """A new ``train`` row runs here; a row of another command is listed as such."""
    assert set(TRAIN) | set(NOT_TRAIN) == set(CASES)
    assert set(PYTHON_LINES) <= set(CASES) | set(API_CASES)
    assert all(CASES[name][1][0] == "finetune" for name in NOT_TRAIN)


@pytest.mark.parametrize("case", TRAIN)
def test_command_line_row_through_the_api_is_one_named_error(case, tmp_path, finished_fedavg):  # noqa: F811
    prepare, argv, _ = CASES[case]
    finished, data_dir = finished_fedavg
    work = tmp_path / "work"
    work.mkdir()
    prepare(work, finished)
    expected, config_class = _expected(case)
    error = _one_error(
        lambda: Call.of(argv).run(work, work / "out", data_dir),
        work,
    )
    assert expected in str(error), str(error)
    assert not _options_named(str(error), config_class), str(error)


# --- the API's own rows: (call, error class, fragment of its line) ----------------------------
def _table(ids: tuple[int, ...] = (1, 2, 3)) -> fp.ClientTable:
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(c, 0.1, (10, 2)) for c in range(3)])
    return fp.from_table(x, np.repeat(ids, 10), np.repeat(range(3), 10))


API_CASES = {
    "caafp signal options with one cluster": (
        lambda: fp.caafp("uci_har", clusters=1, cluster_signal_noise=1, cluster_signal_clip=1),
        ConfigError,
        "cluster_signal_noise, cluster_signal_clip: not used by fp.caafp with the options given",
    ),
    "caafp max_clusters without auto": (
        lambda: fp.caafp("uci_har", max_clusters=4),
        ConfigError,
        "max_clusters: not used by fp.caafp with the options given; leave it out",
    ),
    "fedcref local_k -1 on a built-in dataset": (
        lambda: fp.fedcref(local_k=-1),
        ConfigError,
        "local_k: not used by fp.fedcref with the options given; leave it out",
    ),
    "fedcref local_k -1": (
        lambda: fp.fedcref(_table(), local_k=-1),
        ConfigError,
        "local_k must be an integer >= 2, got -1",
    ),
    "fedcref local_k 0": (
        lambda: fp.fedcref(_table(), local_k=0),
        ConfigError,
        "local_k must be an integer >= 2, got 0",
    ),
    "fedcref local_k 1e12": (
        lambda: fp.fedcref(_table(), local_k=1e12),
        ConfigError,
        "local_k must be an integer >= 2, got 1000000000000.0",
    ),
    "fedcref local_k AUTO": (
        lambda: fp.fedcref(_table(), local_k="AUTO"),
        ConfigError,
        "local_k must be an integer >= 2 or auto, got 'AUTO'",
    ),
    "fedcref local_k 2.0": (
        lambda: fp.fedcref(_table(), local_k=2.0),
        ConfigError,
        "local_k must be an integer >= 2, got 2.0",
    ),
    "cfl theta": (
        lambda: fp.cfl(theta=0.8),
        ConfigError,
        "theta: not used by fp.cfl with the options given; leave it out",
    ),
    "cfl-fixed AS-CFL options": (
        lambda: fp.cfl_fixed(theta=0.8, eps1=0.1),
        ConfigError,
        "theta, eps1: not used by fp.cfl_fixed with the options given; leave them out",
    ),
    "kfed eta": (
        lambda: fp.kfed(_table(), k_star=3, eta=0.1),
        ConfigError,
        "eta: not used by fp.kfed with the options given; leave it out",
    ),
    "ascfl clusters": (
        lambda: fp.ascfl(clusters=3),
        ConfigError,
        "clusters: not used by fp.ascfl with the options given; leave it out",
    ),
    "ft_epochs not a tuple": (
        lambda: fp.caafp("uci_har", ft_epochs=3),
        ConfigError,
        "ft_epochs must be a tuple of one value or more, got 3",
    ),
    "label_noise of one value": (
        lambda: fp.fedavg("uci_har", label_noise=(0.4,)),
        ConfigError,
        "label_noise must be a tuple of 2 values, got (0.4,)",
    ),
    "data and dataset both": (
        lambda: fp.kfed(_table(), dataset="ecoli"),
        ConfigError,
        "give the data once, as data or as dataset=, not both",
    ),
    "clients_per_round below the clusters": (
        lambda: fp.caafp("uci_har", phases=(0, 1, 1), clients_per_round=2),
        ConfigError,
        "clients_per_round=2 is below clusters=3: every Phase 2-3 round trains at least one "
        "client per cluster; give clients_per_round=3 or more, or fewer clusters",
    ),
    "Workers remote as one string": (
        lambda: fp.Workers(local=0, remote="node2:8443"),
        ConfigError,
        "Workers(remote='node2:8443'): expected a tuple of HOST:PORT",
    ),
    "duplicate class names of images": (
        lambda: fp.from_images(
            np.ones((4, 8, 8, 1)),
            [0, 1, 0, 1],
            [0, 0, 1, 1],
            proxy=(np.ones((2, 8, 8, 1)), [0, 1]),
            class_names=["walk", "walk"],
        ),
        DataError,
        "class_names has duplicates: ['walk', 'walk']",
    ),
}


@pytest.mark.parametrize("case", sorted(API_CASES))
def test_api_row_is_one_named_error(case, tmp_path):
    call, kind, fragment = API_CASES[case]
    error = _one_error(call, tmp_path)
    assert isinstance(error, kind), repr(error)
    assert fragment in str(error), str(error)
    assert not re.search(r"--[a-z]", str(error)), str(error)


def test_a_configuration_error_of_a_run_names_the_keyword(tmp_path):
    """Checks that need the data (run by ``Trainer.run``) name the keyword too."""
    data = fp.from_arrays(
        np.random.default_rng(0).normal(size=(40, 16, 2)).astype(np.float32),
        np.tile([0, 1], 20),
        np.repeat([1, 2], 20),
    )
    trainer = fp.caafp(data, phases=(1, 0, 0), clusters=3, clients_per_round=2)
    error = _one_error(lambda: trainer.run(tmp_path / "run", progress=False), tmp_path)
    assert "clusters must be at most 2" in str(error) and "--" not in str(error)
