"""The evaluation protocol of the HAR methods: the per-client split and standardization.

``split`` and ``standardize`` may be left unset (``None``) in a configuration; the runner then
settles them with :func:`with_protocol` before anything is recorded:

* resuming a run directory: the values its ``config.json`` recorded (no ``split``
  recorded: the random split);
* a new run: the time-ordered split (it does not leak overlapping windows into the test set,
  :mod:`fedprune.data.partition`) and the protocol's standardization per dataset
  (:data:`STANDARDIZE`: WISDM z-scored per client and channel with the client's own training
  statistics, UCI-HAR not, as the CA-AFP authors' protocol does).

Your own ``--dataset FILE.npz`` (:mod:`fedprune.data.user`) is not standardized unless
``--standardize`` is given, and its SHA-256 is settled here too (``dataset_sha256``): a run
directory made from other bytes is refused as a different configuration.

An explicit ``--split`` or ``--standardize`` always wins (and a different value than the run
directory recorded is refused as a different configuration).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import ClassVar, Protocol, TypeVar

from fedprune.checks import is_user_file
from fedprune.errors import DataError

# fedprune.data.partition.SPLITS (not imported: it loads numpy; tests check they agree)
SPLITS = ("time-ordered", "random")
STANDARDIZE = {"uci_har": False, "wisdm": True}
# options added later, with what a run directory made before each existed used:
# runs.as_recorded leaves them out of such a run's record, so it resumes
BEFORE_SPLIT = {
    "split": "random",
    "label_noise": None,
    "classes_per_client": None,
    "dataset_sha256": None,
    "model": "har_cnn",
}


def builtin_or_user_file(builtin: tuple[str, ...], what: str, doc: str) -> object:
    """The ``--dataset`` rule of a method family: one of ``builtin`` or the path of your own
    ``.npz`` ``what`` (:func:`fedprune.checks.is_user_file`), described by ``doc`` in the error."""
    from fedprune.checks import Rule
    from fedprune.errors import ConfigError

    def check(name: str, value: str) -> str:
        if isinstance(value, str) and (value in builtin or is_user_file(value)):
            return value
        raise ConfigError(
            f"--dataset must be one of {', '.join(builtin)} or the path of your own .npz "
            f"{what} ({doc}), got {value!r}"
        )

    return Rule(check, "")


def dataset_label(dataset: str) -> str:
    """``--dataset`` as progress bars and messages name it: a built-in dataset's name, or
    your file's name without its folders."""
    return dataset.replace("\\", "/").rsplit("/", 1)[-1] if is_user_file(dataset) else dataset


class HasDataFile(Protocol):
    dataset: str
    dataset_sha256: str | None


class HasProtocol(HasDataFile, Protocol):
    split: str | None
    standardize: bool | None


C = TypeVar("C", bound=HasProtocol)


class SettledByRunDir:
    """Mixin of the HAR configurations: their ``config.json`` record depends on the run
    directory (:func:`settle`); ``ADDED_LATER`` lists their options added later, with the
    value a run made before each existed used."""

    ADDED_LATER: ClassVar[Mapping] = BEFORE_SPLIT

    def record_in(self, out: object) -> dict:
        return settle(self, out, self.ADDED_LATER)[1]


def settle(config: C, out: object, added_later: Mapping) -> tuple[C, dict]:
    """``config`` with its protocol settled for the run directory ``out``
    (:func:`with_protocol`), and the dict that directory's ``config.json`` holds for it (an
    option of ``added_later`` left out where an older run lacks it and has its default,
    :func:`fedprune.runs.as_recorded`)."""
    from fedprune.runs.run_dir import as_recorded, recorded_config

    config = with_protocol(config, recorded_config(out))
    return config, as_recorded(out, config.recorded(), added_later)


def with_protocol(config: C, recorded: Mapping | None) -> C:
    """``config`` with ``split`` and ``standardize`` settled (see the module docstring);
    ``recorded`` is the run directory's ``config.json``, or ``None`` for a new run."""
    split, standardize = config.split, config.standardize
    if recorded is not None:
        split = recorded.get("split", BEFORE_SPLIT["split"]) if split is None else split
        standardize = recorded.get("standardize", False) if standardize is None else standardize
    split = "time-ordered" if split is None else split
    standardize = STANDARDIZE.get(config.dataset, False) if standardize is None else standardize
    sha = settled_sha256(config, recorded)
    return dataclasses.replace(config, split=split, standardize=standardize, dataset_sha256=sha)


def settled_sha256(config: HasDataFile, recorded: Mapping | None) -> str | None:
    """The SHA-256 of your own ``--dataset`` file as it is now (``config.dataset_sha256``
    unchanged for a built-in dataset); a DataError when the run directory (its
    ``config.json``, ``recorded``) was trained on other bytes."""
    if not is_user_file(config.dataset):
        return config.dataset_sha256
    from fedprune.data.user import file_sha256

    sha = file_sha256(config.dataset)
    if recorded is not None and recorded.get("dataset_sha256", sha) != sha:
        raise DataError(
            f"--dataset {config.dataset} is not the file this run was trained on (its "
            "SHA-256 differs); restore that file, or choose another --out for the new data"
        )
    return sha
