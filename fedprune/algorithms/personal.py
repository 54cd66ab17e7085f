"""Personal models of the HAR methods that fine-tune (the pipeline methods and ClusterFL):
every client fine-tunes its start model under its kernel mask (Eq. 12), the personal models
go to the run directory, and the run's ``deploy`` manifest says how to ship them. A run that
ends so is a :class:`PersonalRun` (its :meth:`~PersonalRun.personalize` is that step, and
the summary's ``sparsity``, ``finetune`` and ``deploy``); ``fedprune finetune`` takes the
same entries (:func:`personal_entries`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, TypeVar

import numpy as np

from fedprune.algorithms.caafp.finetune import FineTuned, finetune_and_evaluate
from fedprune.configs.protocol import dataset_label
from fedprune.data.partition import FederatedData
from fedprune.data.registry import har_recipe
from fedprune.engine.har_run import HarRun
from fedprune.engine.metrics import noise_summary
from fedprune.models.user import UserModel
from fedprune.runs import RunDir, artefacts
from fedprune.runs.deploy import har_manifest

C = TypeVar("C")


class FineTuneSettings(Protocol):
    """The configuration fields fine-tuning reads (every HAR method's configuration)."""

    method: str
    dataset: str
    ft_epochs: tuple[int, ...]
    seed: int
    batch_size: int
    learning_rate: float
    standardize: bool
    split: str
    label_noise: tuple[float, float] | None
    classes_per_client: int | None
    dataset_sha256: str | None


def finetune_personal(
    run: RunDir,
    data: FederatedData,
    start: Mapping[int, Sequence[np.ndarray]],
    kernel_masks: Mapping[int, Sequence[np.ndarray]],
    settings: FineTuneSettings,
    progress: bool,
    pruned: bool,
    model: str | UserModel = "har_cnn",
) -> tuple[FineTuned, dict]:
    """Fine-tune every client from ``start[id]`` under ``kernel_masks[id]``, write each
    length's ``personal_ft<E>.npz``; returns the result and the summary's ``deploy`` entry
    (``pruned``: the run also wrote ``masks.npz``). With noisy clients (``--label-noise``)
    each length's entry also gives the noisy and the clean clients' mean accuracy. ``model``:
    the table model's name or your own (recorded in the deploy manifest)."""
    tuned = finetune_and_evaluate(
        data,
        start,
        kernel_masks,
        settings.ft_epochs,
        settings.seed,
        settings.batch_size,
        settings.learning_rate,
        desc=f"{settings.method} {dataset_label(settings.dataset)} fine-tuning "
        f"{data.num_clients} clients",
        progress=progress,
        model=model,
    )
    for epochs, personal in tuned.models.items():
        artefacts.write_personal_models(run.path, epochs, personal)
    log_finetune(run, tuned)
    if data.noisy_clients:  # each length's accuracy of the noisy and of the clean clients
        for entry in tuned.summary.values():
            client_acc = {int(k): v for k, v in entry["client_acc"].items()}
            entry["label_noise"] = noise_summary(data.noisy_clients, client_acc)
    shape, labels = data.input_shape, data.class_names
    manifest = har_manifest(
        "personal",
        har_recipe(settings),
        shape,
        labels,
        settings.ft_epochs,
        pruned=pruned,
        clustered=True,
        model=model.recorded if isinstance(model, UserModel) else model,
    )
    return tuned, manifest.to_json()


def log_finetune(run: RunDir, tuned: FineTuned) -> None:
    """The fine-tuning results in the run's TensorBoard files, the step being the number of
    fine-tuning epochs: the clients' personal accuracies as a histogram, their mean and
    fairness as scalars."""
    for epochs, entry in tuned.summary.items():
        accuracies = list(entry["client_acc"].values())
        run.events.histogram("finetune/personal_accuracy", accuracies, int(epochs))
        run.events.add_row(
            {
                "step": int(epochs),
                "finetune/avg_acc": entry["avg_acc"],
                "finetune/fairness": entry["fairness"],
            }
        )


def personal_entries(tuned: FineTuned, deploy: dict) -> dict:
    """The summary's entries of a fine-tuning (:func:`finetune_personal`'s result): the
    personal models' ``sparsity``, each length's ``finetune`` scores and the ``deploy``
    manifest."""
    return {"sparsity": tuned.sparsity, "finetune": tuned.summary, "deploy": deploy}


class PersonalRun(HarRun[C]):
    """A HAR run that ends in personal models (the pipeline methods, ClusterFL)."""

    def personalize(
        self,
        run: RunDir,
        start: Mapping[int, Sequence[np.ndarray]],
        kernel_masks: Mapping[int, Sequence[np.ndarray]],
        pruned: bool,
    ) -> dict:
        """Phase 4 (Eq. 12): every client of the run's data fine-tunes ``start[id]`` under
        ``kernel_masks[id]`` for the configuration's lengths (:func:`finetune_personal`;
        ``pruned``: the run wrote ``masks.npz``); returns :func:`personal_entries`."""
        tuned, deploy = finetune_personal(
            run,
            self.data,
            start,
            kernel_masks,
            self.config,
            self.inputs.progress,
            pruned=pruned,
            model=self.spec.model,
        )
        return personal_entries(tuned, deploy)
