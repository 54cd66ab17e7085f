"""The fields every HAR method shares (defaults: the CA-AFP paper's Tables 5-6).

Each function returns a fresh :func:`~fedprune.configs.fields.param`, so that every
configuration keeps its own field order (``config.json`` and positional construction, e.g.
``FedAvgConfig("uci_har")``, stay as they were) while the help text, default and rule of a
shared field are written once, here.
"""

from __future__ import annotations

from typing import Any

from fedprune.checks import (
    POSITIVE,
    SEED,
    Rule,
    check_count,
    count,
    each,
    interval,
    one_of,
    optional,
)
from fedprune.configs.fields import float_tuple, int_tuple, param
from fedprune.configs.protocol import SPLITS, builtin_or_user_file
from fedprune.errors import ConfigError

# the HAR datasets of fedprune.data.registry.DATASETS (not imported: it loads scipy;
# tests/configs/test_har.py checks the two agree)
HAR_DATASETS = ("uci_har", "wisdm")
USER_MODEL = "user:"  # fedprune.models.user.PREFIX (not imported: it is not a config module)


def dataset() -> Any:  # noqa: ANN401 (a dataclass field)
    return param(
        help="which HAR dataset to use: uci_har, wisdm, or your own windows as PATH.npz "
        "(keys x, y, client_id; docs/data.md)",
        rule=builtin_or_user_file(HAR_DATASETS, "file", "docs/data.md 'Your own data'"),
        metavar="{uci_har,wisdm,PATH.npz}",
    )


def dataset_sha256() -> Any:  # noqa: ANN401
    """Not an option: the SHA-256 of your own ``--dataset`` file, settled when the run starts
    (:func:`fedprune.configs.protocol.with_protocol`), so a changed file is not resumed."""
    return param(None, help="SHA-256 of your own --dataset file", cli=False)


HAR_MODELS = ("har_cnn", "har_cnn_small")  # the table's models of sensor windows


def _check_model(name: str, value: str) -> str:
    if isinstance(value, str) and (value in HAR_MODELS or value.startswith(USER_MODEL)):
        return value
    raise ConfigError(
        f"--model must be one of {', '.join(HAR_MODELS)} (or your own model, given to the "
        f"Python API as model_fn), got {value!r}"
    )


def model() -> Any:  # noqa: ANN401
    """``--model``: a table model of windows (:data:`HAR_MODELS`), or ``user:<name>`` for your
    own (:mod:`fedprune.models.user`; set by the Python API from its ``model_fn``)."""
    return param(
        "har_cnn",
        help="the model trained: har_cnn (the paper's 1D-CNN) or har_cnn_small (~4.9 k "
        "parameters: int8 file <= 16 KB and arena <= 8 KB, for microcontrollers)",
        rule=Rule(_check_model, ""),
    )


def rounds(default: int = 50) -> Any:  # noqa: ANN401
    return param(default, help="global rounds", rule=count())


AUTO = "auto"  # --clusters auto: K chosen from the data (CA-AFP's choose_k)
# MIN_SILHOUETTE of CA-AFP's choose_k (not imported: it loads scikit-learn;
# tests/configs/test_har.py checks the two agree)
MIN_SILHOUETTE = 0.2


def _clusters_or_auto(text: str) -> int | str:
    if text == AUTO:
        return AUTO
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"expected an integer K >= 1 or {AUTO}, got {text!r}") from None


def _check_clusters_or_auto(name: str, value: int | str) -> int | str:
    if value == AUTO:
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"--{name} must be an integer K >= 1 or {AUTO}, got {value!r}")
    return check_count(name, value)


def clusters(default: int = 3, auto: bool = False) -> Any:  # noqa: ANN401
    """``--clusters K``; ``auto``: also ``--clusters auto`` (K chosen from the data with the
    silhouette rule, the pipeline methods)."""
    if not auto:
        return param(default, help="clusters K", rule=count())
    return param(
        default,
        help="clusters K, or auto: K chosen from the clustering pass by the largest mean "
        f"silhouette, 1 when none reaches {MIN_SILHOUETTE:g} (see --max-clusters)",
        rule=Rule(_check_clusters_or_auto, f"K >= 1 or {AUTO}"),
        parse=_clusters_or_auto,
        metavar=f"{{K,{AUTO}}}",
    )


def clients_per_round() -> Any:  # noqa: ANN401
    return param(10, help="clients sampled per round", rule=count())


def local_epochs() -> Any:  # noqa: ANN401
    return param(3, help="local epochs E", rule=count())


def batch_size() -> Any:  # noqa: ANN401
    return param(32, help="batch size", rule=count())


def learning_rate() -> Any:  # noqa: ANN401
    return param(1e-3, help="client Adam learning rate", flag="lr", rule=POSITIVE)


def seed() -> Any:  # noqa: ANN401
    return param(0, help="seed for init, split, sampling", rule=SEED)


def standardize() -> Any:  # noqa: ANN401
    return param(
        None,
        help="z-score each channel per client, fitted on the client's training windows",
        default_text="the protocol's: WISDM yes, UCI-HAR no; a resumed run keeps its own",
    )


def split() -> Any:  # noqa: ANN401
    return param(
        None,
        help="per-client train/test split: time-ordered (the first 80 % of each class's "
        "windows train) or random (leaks overlapping windows; older runs)",
        rule=optional(one_of(SPLITS)),
        default_text="time-ordered; a resumed run keeps its own",
    )


def label_noise() -> Any:  # noqa: ANN401
    return param(
        None,
        help="scenario: noisy labels on a fraction C of the clients, a fraction L of each "
        "one's training windows relabelled uniformly (the paper's Noisy 0.4,0.3, Drift 0.4,1.0)",
        rule=optional(each(interval(0, 1, low_open=True))),
        parse=float_tuple(2),
        metavar="C,L",
        default_text="none",
    )


def classes_per_client() -> Any:  # noqa: ANN401
    return param(
        None,
        help="scenario: each client keeps k of its classes (those in both its splits), "
        "drawn per seed and client; at most the dataset's classes - 1",
        rule=optional(count()),
        metavar="K",
        default_text="all",
    )


def ft_epochs(help: str = "fine-tuning epochs reported, all from one trained run") -> Any:  # noqa: A002, ANN401
    return param((3, 25), help=help, rule=each(count(0)), parse=int_tuple(), metavar="E[,E...]")


def eval_every() -> Any:  # noqa: ANN401
    return param(
        5,
        help="held-out accuracy (each client's test windows, mean over the clients) every N "
        "rounds and after the last, in metrics.csv and TensorBoard; never used for training; "
        "0: never",
        rule=count(0),
        metavar="N",
    )


def method(name: str) -> Any:  # noqa: ANN401
    """The method's name, recorded in ``config.json``; not an option."""
    return param(name, help="method name", cli=False)
