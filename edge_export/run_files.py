"""Read a finished run's files without TensorFlow; a missing or damaged file is one error.

Every file the export needs is read here, whole, before anything heavy starts: ``config.json``
and ``summary.json``, then the models of the run's method (``checkpoint.npz`` for FedAvg,
``personal_ft<E>.npz`` with ``masks.npz`` / ``clusters.json`` for the personalized methods,
``community_models.npz`` for FedCRef). Whatever goes wrong (a truncated JSON file, a truncated
or garbage ``.npz``, a missing array) is a :class:`DataError` that names the file and says what
to do, so ``edge-export`` can answer with one line within a second.

(A reading helper of the export for now: :class:`fedprune.runs.RunDir` creates the directory
and writes ``config.json`` when constructed, which a reader must not do.)
"""

from __future__ import annotations

import dataclasses
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from fedprune.errors import ConfigError, DataError
from fedprune.runs import CHECKPOINT, CONFIG, SUMMARY

COMMUNITY_MODELS = "community_models.npz"
MASKS = "masks.npz"
CLUSTERS = "clusters.json"
RETRAIN = "re-run training to write it again"
_PERSONAL = re.compile(r"personal_ft(\d+)\.npz")


def personal_file(epochs: int) -> str:
    """The file name of the personal models after ``epochs`` epochs of fine-tuning."""
    return f"personal_ft{epochs}.npz"


def _damaged(path: Path, err: BaseException) -> DataError:
    text = str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)
    reason = " ".join(text.split()) or type(err).__name__
    if isinstance(err, zipfile.BadZipFile):
        reason = f"truncated or not an .npz archive: {reason}"
    elif isinstance(err, EOFError):
        reason = f"truncated: {reason}"
    elif isinstance(err, json.JSONDecodeError):
        reason = f"truncated or invalid JSON: {reason}"
    return DataError(f"{path} is damaged ({reason}); {RETRAIN}")


def read_json(path: Path) -> Any:
    """The content of a JSON file; a truncated or garbled file is a :class:`DataError`."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"{path} is missing; {RETRAIN}") from None
    except (ValueError, OSError) as err:  # JSONDecodeError, UnicodeDecodeError, a folder...
        raise _damaged(path, err) from None


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` archive, read now (a damaged member fails here, not later)."""
    try:
        with open(path, "rb") as f:
            if f.read(2) != b"PK":  # np.load would try it as .npy or pickle
                raise ValueError("not an .npz archive")
        archive = np.load(path, allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):
            raise ValueError("a single .npy array, not an .npz archive")
        with archive:
            return {key: archive[key] for key in archive.files}
    except FileNotFoundError:
        raise DataError(f"{path} is missing; {RETRAIN}") from None
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError) as err:
        raise _damaged(path, err) from None


def _numbered(path: Path, arrays: dict[str, np.ndarray], pattern: str) -> dict[int, list]:
    """``{a: [arrays[f"<prefix>{a}_0"], ...]}`` for keys matching ``pattern`` (two numbers);
    a gap in the numbering is a damaged file."""
    groups: dict[int, dict[int, np.ndarray]] = {}
    for key, value in arrays.items():
        match = re.fullmatch(pattern, key)
        if match is None:
            raise _damaged(path, ValueError(f"unexpected array {key!r}"))
        groups.setdefault(int(match[1]), {})[int(match[2])] = value
    result = {}
    for group, members in groups.items():
        if sorted(members) != list(range(len(members))):
            raise _damaged(path, ValueError(f"the arrays of {group} are not numbered 0..n-1"))
        result[group] = [members[i] for i in range(len(members))]
    return result


def read_checkpoint(path: Path) -> dict[str, list[np.ndarray]]:
    """The named array lists of a :meth:`fedprune.runs.RunDir.save_checkpoint` file."""
    flat = read_npz(path)
    arrays = {}
    try:
        for key in flat:
            if key.endswith("__n"):
                name = key[:-3]
                arrays[name] = [flat[f"{name}__{i}"] for i in range(int(flat[key]))]
        int(flat["round"])
    except KeyError as err:
        raise _damaged(path, KeyError(f"no array {err.args[0]!r}")) from None
    except (TypeError, ValueError) as err:
        raise _damaged(path, err) from None
    return arrays


@dataclasses.dataclass(frozen=True)
class RunFiles:
    """What a finished run holds for the export, already read and checked.

    Exactly one of ``shared`` (FedAvg: the global model), ``personal`` (each client's model,
    by client id) and ``community`` (FedCRef: the community autoencoders) is set. ``masks``
    are the pruned methods' kernel masks per cluster and ``clusters`` each client's cluster.
    """

    path: Path
    config: dict
    source: str
    shared: list[np.ndarray] | None = None
    personal: dict[int, list[np.ndarray]] | None = None
    community: list[list[np.ndarray]] | None = None
    masks: dict[int, list[np.ndarray]] | None = None
    clusters: dict[int, int] | None = None

    @property
    def fedcref(self) -> bool:
        return self.community is not None


def read_config(path: str | Path) -> dict:
    """``config.json`` of the run directory ``path``; anything else is a :class:`DataError`."""
    path = Path(path)
    hint = "pass the folder of a finished fedprune run (the --out it was given)"
    if not path.exists():
        raise DataError(f"{path} is not a fedprune run directory (it does not exist); {hint}")
    if not path.is_dir():
        raise DataError(f"{path} is not a fedprune run directory (it is a file); {hint}")
    if not (path / CONFIG).exists():
        raise DataError(f"{path} is not a fedprune run directory (no {CONFIG}); {hint}")
    config = read_json(path / CONFIG)
    if not isinstance(config, dict):
        raise _damaged(path / CONFIG, ValueError("not a JSON object"))
    return config


def read_run(path: str | Path, ft_epochs: int | None = None) -> RunFiles:
    """Read and check every file the export of the finished run ``path`` needs.

    FedAvg runs deploy their global model (``checkpoint.npz``) to every client; CA-AFP, its
    baselines and ClusterFL each client's personal model after ``ft_epochs`` epochs of
    fine-tuning (default: the longest the run has); FedCRef runs their community autoencoders.
    """
    path = Path(path)
    config = read_config(path)
    if not (path / SUMMARY).exists():
        raise DataError(f"{path}: the run has not finished (no {SUMMARY}); run it to the end")
    read_json(path / SUMMARY)
    missing = [k for k in ("seed",) if k not in config]
    method = config.get("method")
    if method != "fedcref":
        missing += [k for k in ("dataset",) if k not in config]
    if missing:
        raise _damaged(path / CONFIG, KeyError(f"no {', '.join(missing)}"))
    if method == "fedcref":
        return _community(path, config)
    if method == "fedavg":
        arrays = read_checkpoint(path / CHECKPOINT)
        if "trainable" not in arrays:
            raise _damaged(path / CHECKPOINT, KeyError("no trainable weights"))
        shared = [np.asarray(a) for a in arrays["trainable"]]
        return RunFiles(path, config, f"{CHECKPOINT} (global model)", shared=shared)
    if "ft_epochs" in config:  # CA-AFP, its baselines, ClusterFL: fine-tuned personal models
        return _personal(path, config, ft_epochs)
    raise ConfigError(f"{path}: runs of method {method!r} cannot be exported yet")


def _personal(path: Path, config: dict, ft_epochs: int | None) -> RunFiles:
    try:
        listed = sorted(int(e) for e in config["ft_epochs"])
    except (TypeError, ValueError):
        raise _damaged(path / CONFIG, ValueError("ft_epochs is not a list of numbers")) from None
    present = sorted(
        int(m[1]) for p in path.iterdir() if (m := _PERSONAL.fullmatch(p.name)) is not None
    )
    e = (max(listed) if listed else None) if ft_epochs is None else ft_epochs
    have = (
        f"the run has personal models after {', '.join(map(str, present))} epochs: pass one "
        "of those with --ft-epochs"
        if present
        else f"the run has no personal_ft<E>.npz; {RETRAIN}"
    )
    option = f"--ft-epochs {ft_epochs}" if ft_epochs is not None else "the longest fine-tuning"
    if e is None or e not in present:
        name = personal_file(e) if e is not None else "personal_ft<E>.npz"
        raise DataError(f"{path / name} is missing ({option}); {have}")
    file = path / personal_file(e)
    personal = _numbered(file, read_npz(file), r"client(\d+)_(\d+)")
    if not personal:
        raise _damaged(file, ValueError("no client models"))
    masks = clusters = None
    if (path / MASKS).exists():  # pruned methods: each client's cluster mask
        masks = _numbered(path / MASKS, read_npz(path / MASKS), r"cluster(\d+)_(\d+)")
        raw = read_json(path / CLUSTERS)
        try:
            clusters = {int(k): int(v) for k, v in raw.items()}
        except (AttributeError, TypeError, ValueError):
            raise _damaged(path / CLUSTERS, ValueError("not a client -> cluster map")) from None
        unknown = sorted(set(clusters.values()) - set(masks))
        if unknown:
            raise _damaged(path / MASKS, KeyError(f"no masks of cluster(s) {unknown}"))
    return RunFiles(path, config, file.name, personal=personal, masks=masks, clusters=clusters)


def _community(path: Path, config: dict) -> RunFiles:
    file = path / COMMUNITY_MODELS
    if not file.exists():
        raise DataError(f"{path} is not a finished FedCRef run (no {COMMUNITY_MODELS}); {RETRAIN}")
    models = _numbered(file, read_npz(file), r"c(\d+)_(\d+)")
    if not models:
        raise DataError(f"{path}: the run found no community, nothing to export")
    return RunFiles(path, config, file.name, community=[models[g] for g in sorted(models)])


def parse_clients(spec: str) -> list[int] | None:
    """Client ids of ``--clients`` (``None`` for ``all``); a malformed list is an error."""
    if spec == "all":
        return None
    try:
        ids = [int(s) for s in spec.split(",") if s.strip()]
    except ValueError:
        raise ConfigError(f"--clients must be 'all' or comma-separated ids, got {spec!r}") from None
    if not ids:
        raise ConfigError(f"--clients must be 'all' or comma-separated ids, got {spec!r}")
    return ids
