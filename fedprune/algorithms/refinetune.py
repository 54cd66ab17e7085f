"""``fedprune finetune``: fine-tune a finished HAR run's models again, for other lengths.

Fine-tuning (CA-AFP Phase 4, Eq. 12; every HAR method's personal models) is local: each client
trains its own copy of a start model under a kernel mask, and nothing is communicated. What it
starts from is kept by every run that fine-tunes (its method's ``finetune_start`` in
:mod:`fedprune.methods`: a pipeline run's ``cluster_models.npz``, ``masks.npz`` and
``clusters.json``; a ClusterFL run's final W in ``checkpoint.npz``). So other fine-tuning
lengths of a finished run need no new federated rounds: the fine-tuning study (CA-AFP Figure 3,
Table 9: lengths 0-25 of six methods) fine-tunes Table 2's runs again instead of training
each method twice, and a user can ask "how many epochs?" of a run they already have.

The new run directory ``out`` holds:

* ``config.json``: the source's configuration with ``ft_epochs`` replaced, plus
  ``finetuned_from`` (the source's path relative to ``out`` and the sha256 of its
  ``summary.json``), so re-running the command with another source is refused;
* ``metrics.csv``, ``checkpoint.npz``, ``clusters.json``, ``masks.npz``,
  ``cluster_models.npz``: copies of the source's (the same federated rounds; so the new run
  can be fine-tuned again in turn);
* ``personal_ft<E>.npz`` for every new length and ``summary.json``: the source's summary with
  ``finetune``, ``sparsity`` (of the personal models) and ``deploy`` from this fine-tuning,
  ``finetune_wall_s`` (this command's fine-tuning) and ``wall_s`` (the source's plus that: the
  compute behind the run).

Fine-tuning uses the source's seed, batch size and learning rate, and each client's random
streams depend only on (seed, client)
(:func:`fedprune.algorithms.caafp.finetune.finetune_all`), so a length
the source also has gives the same numbers (tests/algorithms/test_refinetune.py). Fine-tuning
is not checkpointed: an interrupted ``fedprune finetune`` starts it again; a finished one is
returned as it is.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path

from fedprune.algorithms.personal import finetune_personal, log_finetune, personal_entries
from fedprune.configs.fields import Config
from fedprune.configs.protocol import with_protocol
from fedprune.data.registry import har_recipe, load_recorded
from fedprune.engine.compose import Inputs, RunPlan
from fedprune.errors import ConfigError
from fedprune.lazy import resolve
from fedprune.methods import METHODS, Method
from fedprune.models import user
from fedprune.models.spec import ModelSpec
from fedprune.runs import FinishedRun, RunDir, names, open_finished
from fedprune.runs.run_dir import check_out_dir

COPIED = (
    names.METRICS,
    names.CHECKPOINT,
    names.CLUSTERS,
    names.MASKS,
    names.CLUSTER_MODELS,
    names.MODEL_ARCHITECTURE,
)


def fine_tuning_methods() -> list[str]:
    """The methods whose finished runs ``fedprune finetune`` takes."""
    return [m.name for m in METHODS.values() if m.finetune_start is not None]


def method_config(method: Method, recorded: dict) -> Config:
    """``method``'s configuration from a recorded ``config.json`` (keys that are not fields,
    e.g. ``finetuned_from``, ignored; lists back to tuples); its rules check every value."""
    known = {f.name for f in dataclasses.fields(method.config)}
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in recorded.items()}
    return method.config(**{k: v for k, v in fields.items() if k in known})


def derived_config(run: FinishedRun, ft_epochs: tuple[int, ...], out: Path) -> dict:
    """The configuration ``out`` records for ``run`` fine-tuned for ``ft_epochs`` (the
    source's, ``ft_epochs`` replaced, ``finetuned_from`` added); the lengths pass the
    method's own rule (one ``--ft-epochs`` line)."""
    method = METHODS.get(run.method or "")
    if method is None or method.finetune_start is None:
        raise ConfigError(
            f"{run.path} is a {run.method or 'unknown'} run, which has no personal models to "
            f"fine-tune; pass a run of {', '.join(fine_tuning_methods())}"
        )
    if out.resolve() == run.path.resolve():
        raise ConfigError(f"--out {out} is the source run itself; choose a new folder")
    record = {**run.config, "ft_epochs": sorted(set(ft_epochs))}
    method_config(method, record)  # the lengths' own rule
    digest = hashlib.sha256((run.path / names.SUMMARY).read_bytes()).hexdigest()
    source = {"run": os.path.relpath(run.path, out), "summary_sha256": digest}
    return {**record, "finetuned_from": source}


@dataclasses.dataclass(frozen=True)
class Refinement:
    """What ``fedprune finetune`` is asked: the finished run ``source`` fine-tuned again for
    ``ft_epochs``; once settled (:meth:`RefinementRun.settle`), ``run`` is that run opened and
    ``record`` the new run's configuration (:func:`derived_config`)."""

    source: str | os.PathLike
    ft_epochs: tuple[int, ...]
    run: FinishedRun | None = None
    record: dict | None = None


class RefinementRun(RunPlan[Refinement]):
    """``fedprune finetune`` as a run of the composer (:mod:`fedprune.engine.compose`): the
    record is the source's configuration with the new lengths (:func:`derived_config`); the
    source's data, model and fine-tuning start are loaded before ``out`` is made; there are
    no rounds; the summary fine-tunes, copies the source's files and writes the summary."""

    @classmethod
    def settle(cls, config: Refinement, out: Path, given: Mapping) -> tuple[Refinement, dict]:
        check_out_dir(out)
        run = open_finished(config.source)
        record = derived_config(run, config.ft_epochs, out)
        return dataclasses.replace(config, run=run, record=record), record

    def __init__(self, config: Refinement, inputs: Inputs):
        super().__init__(config, inputs)
        run = self.source = config.run
        method = METHODS[run.method]
        self.settings = with_protocol(method_config(method, config.record), run.config)
        self.data = data = load_recorded(har_recipe(self.settings), inputs.data_dir)
        # a table model, or the source run's model.json
        self.trained = user.resolve(self.settings.model, None, run.path)
        spec = ModelSpec(data.input_shape, data.num_classes, self.settings.seed, self.trained)
        # ({client: start weights}, {client: kernel masks})
        self.finetune_inputs = resolve(method.finetune_start)(run, data, spec)

    def summary(self, run: RunDir, result: None) -> dict:
        source, out = self.source, self.inputs.out
        clock, pruned = time.perf_counter(), (source.path / names.MASKS).exists()
        tuning = (run, self.data, *self.finetune_inputs, self.settings, self.inputs.progress)
        tuned, deploy = finetune_personal(*tuning, pruned=pruned, model=self.trained)
        seconds = time.perf_counter() - clock
        for name in COPIED:
            if (source.path / name).exists():
                shutil.copy2(source.path / name, out / name)
        run.events.rebuild(run.metrics_rows())  # the source run's rounds, then these lengths
        log_finetune(run, tuned)
        return {
            **source.summary,
            **personal_entries(tuned, deploy),
            "finetuned_from": self.config.record["finetuned_from"],
            "finetune_wall_s": seconds,
            "wall_s": float(source.summary.get("wall_s", 0.0)) + seconds,
        }


def refinetune(
    source: str | os.PathLike,
    ft_epochs: tuple[int, ...],
    out: str | os.PathLike,
    data_dir: str | os.PathLike | None = None,
    progress: bool = True,
) -> dict:
    """Fine-tune the finished run ``source`` for ``ft_epochs`` into the new run directory
    ``out`` (see the module docstring); returns ``out``'s summary. Every check (the source,
    the lengths, ``out``, the data) passes before ``out`` is made."""
    return RefinementRun.run(Refinement(source, ft_epochs), out, data_dir, progress)
