"""One autoencoder per community, trained with FedAvg on TFF (FedCRef, Phase 3, Alg. 1 l. 22-24).

Every cluster of a community is one FedAvg participant holding that cluster's samples (a
client with two clusters in one community takes part twice, once per cluster). All members
take part in every round (communities are small). Rounds are calls of the shared learning
process (:func:`fedprune.engine.process.build_learning_process`: broadcast, local Adam epochs,
data-size-weighted mean, server SGD(1.0)), with communities trained concurrently.

Interpretation (not given in the paper): each community model starts from the same seeded
initialization, and members run ``local_epochs`` (default 1) epochs of Adam per round. The
autoencoder is the paper's or your own (``model``, a :class:`~fedprune.models.user.UserModel`
building it from ``input_dim``). The community models are what a finished run deploys
(:func:`deploy_manifest`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import tensorflow_federated as tff

from fedprune.configs.fedcref import FedCRefRunConfig
from fedprune.configs.protocol import is_user_file
from fedprune.engine.client_work import LocalTraining
from fedprune.engine.datasets import round_seed
from fedprune.engine.local_loop import reconstruction_tensors
from fedprune.engine.process import build_learning_process
from fedprune.engine.rounds import call_concurrently
from fedprune.models.spec import AutoencoderSpec
from fedprune.models.user import UserModel
from fedprune.runs.deploy import DeployManifest, image_clients_recipe
from fedprune.runs.names import COMMUNITY_MODELS


class CommunityTrainer:
    """FedAvg of the autoencoder (the paper's, or ``model``) over the member clusters of each
    community."""

    def __init__(
        self,
        input_dim: int,
        rounds: int = 15,
        local_epochs: int = 1,
        batch_size: int = 32,
        learning_rate: float = 1e-3,
        seed: int = 0,
        model: str | UserModel = "autoencoder",
    ):
        self.rounds = rounds
        self.batch_size = batch_size
        self.seed = seed
        self.process = build_learning_process(
            AutoencoderSpec(input_dim, seed, model=model),
            LocalTraining(local_epochs, learning_rate),
        )

    def _train_one(self, members: Sequence[np.ndarray], key: int) -> list[np.ndarray]:
        state = self.process.initialize()
        for r in range(self.rounds):
            data = [
                reconstruction_tensors(x, self.batch_size, round_seed(self.seed, key * 1000 + r, m))
                for m, x in enumerate(members)
            ]
            state = self.process.next(state, data).state
        weights = self.process.get_model_weights(state)
        return [np.asarray(w) for w in tff.structure.flatten(weights.trainable)]

    def train(self, communities: Sequence[Sequence[np.ndarray]], iteration: int) -> list:
        """Weights (Keras order) of one FedAvg-trained autoencoder per community; each
        community is a list of its member clusters' samples."""
        calls = [
            functools.partial(self._train_one, members, iteration * 10_000 + g)
            for g, members in enumerate(communities)
        ]
        return call_concurrently(calls) if calls else []


def deploy_manifest(config: FedCRefRunConfig, input_dim: int) -> dict:
    """The ``deploy`` manifest of a finished FedCRef run of ``config``
    (:mod:`fedprune.runs.deploy`): its community autoencoders (``community_models.npz``, of
    ``config.model`` on vectors of ``input_dim``) and the recipe of its clients' data, your
    table's vectors as given (:func:`table_recipe`) or the simulated system's images scaled to
    [0, 1]."""
    mine = is_user_file(config.dataset)
    return DeployManifest(
        kind="community",
        models=COMMUNITY_MODELS,
        model=config.model,
        input_shape=(input_dim,),
        labels=None,
        normalization="none (your vectors as given)" if mine else "pixels scaled to [0, 1]",
        data=table_recipe(config) if mine else image_clients_recipe(config.recorded()),
    ).to_json()


def table_recipe(config: FedCRefRunConfig) -> dict:
    """The deploy manifest's recipe of your table: the file and its SHA-256 (when known)."""
    recipe = {"loader": "table", "dataset": config.dataset}
    if config.dataset_sha256 is not None:
        recipe["sha256"] = config.dataset_sha256
    return recipe
