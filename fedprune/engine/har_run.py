"""What every run on HAR windows prepares and records, once: :class:`HarRun`.

FedAvg, the clustered masked pipeline and ClusterFL start alike: the windows by the recipe
the run records (:func:`fedprune.data.registry.har_recipe`), the counts that may not exceed
the clients checked against them (:attr:`~fedprune.engine.compose.RunPlan.at_most_clients`),
the classifier resolved and built once (:func:`~fedprune.engine.compose.har_model`); and
their summaries share the same first entries (:meth:`HarRun.har_summary`). A family
subclasses :class:`HarRun` and adds only its own checks, rounds and entries.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

from fedprune.configs.protocol import dataset_label
from fedprune.data.registry import har_recipe, load_recorded
from fedprune.engine.compose import Inputs, RunPlan, har_model
from fedprune.engine.loop import RoundsResult
from fedprune.sparsity.layers import dense_layers

C = TypeVar("C")


class HarRun(RunPlan[C]):
    """A run on HAR windows (the module text): prepare loads ``data``, checks the counts of
    :attr:`at_most_clients` (``clients_per_round`` unless a family says otherwise) and builds
    the model (``spec``, ``keras``, ``architecture``)."""

    takes: ClassVar[tuple[str, ...]] = ("model",)
    at_most_clients: ClassVar[tuple[str, ...]] = ("clients_per_round",)

    def __init__(self, config: C, inputs: Inputs):
        super().__init__(config, inputs)
        self.data = load_recorded(har_recipe(config), inputs.data_dir)
        self.check_counts(self.data.num_clients, dataset_label(config.dataset))
        self.spec, self.keras, self.architecture = har_model(config, self.data, inputs)

    def har_summary(self, result: RoundsResult[Any], params: int) -> dict:
        """The summary's entries every HAR run has: :meth:`summary_head`, the clients, the
        model's ``params`` and dense layers, and the rounds' wall time (``result``)."""
        return {
            **self.summary_head(),
            "num_clients": self.data.num_clients,
            "params": params,
            "dense_layers": dense_layers(self.keras),
            "wall_s": result.clock.seconds(),
        }
