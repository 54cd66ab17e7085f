"""The clustered-FL round, the same for every method, on the shared round loop
(:class:`ClusteredRounds`, an :class:`fedprune.engine.loop.Algorithm`); a method is a
:class:`ClusterRule` (:mod:`.rules`: AS-CFL, CFL, CFL with a fixed K, IFCA, FedAvg).

A round ``t`` (Algorithm 1 lines 3-37, general form):

1. the reporting clients (:func:`reporting`: all but a seeded ``--client-dropout`` share);
2. the rule says which model each of them trains (:meth:`ClusterRule.choose`; it may ask for
   the clients' losses under every model);
3. the clients train on TFF (:mod:`fedprune.engine.per_client`: E local epochs of SGD at
   the learning rate 0.1 · 0.99^(t-1), or the rule's epochs per client) and return Δw;
4. the rule re-forms the clusters from the updates and aggregates within them
   (:meth:`ClusterRule.regroup`);
5. the clients that did not report follow: where the rule renumbers its clusters, to where
   the members of their old cluster went; else they keep their model's index;
6. every client's accuracy on its own test images under its cluster's new model, and the
   round's traffic (:meth:`ClusterRule.traffic`).

**Client dropout** (§4.2.3, "10% random dropout per round"): a seeded fraction of the
clients does not report in a round; it keeps its cluster and is evaluated with its cluster's
new model.

Accuracy is each client's accuracy on its own test images (its labels and rotation) under
its cluster's model after the round's aggregation; "acc" is the mean over clients, as the
paper's per-client personalized models imply; "acc_pooled" counts every test image once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from fedprune.algorithms.ascfl import auto_clusters, metrics, split_merge
from fedprune.algorithms.ascfl.auto_clusters import ChosenStart
from fedprune.algorithms.caafp.choose_k import ClusterChoice
from fedprune.configs.ascfl import ClusteredImageConfig
from fedprune.configs.protocol import dataset_label, is_user_file
from fedprune.data.rotated_partition import RotatedFederatedData
from fedprune.engine import per_client
from fedprune.engine.loop import Algorithm, Schema, Step
from fedprune.engine.per_client import ClientUpdates
from fedprune.models.spec import ModelSpec
from fedprune.privacy import accounting

Weights = list[np.ndarray]
MB = 1e6
DELTA = 1e-5  # δ of the reported (ε, δ) (the paper's value is lost from our copy)


@dataclasses.dataclass
class ClusterState:
    """The cluster models, each client's cluster, the last round's labels (stability) and
    the last split (AS-CFL's no-reunite guard); with ``--clusters auto`` how K was chosen
    (:mod:`.auto_clusters`; in the checkpoint as ``cluster_choice``, so a resumed run keeps
    it)."""

    models: list[Weights]
    cluster_of: np.ndarray  # per client id
    previous_splits: tuple = ()
    # per client id: absent when Stage 1 formed the clusters and not placed since (late)
    late: np.ndarray | None = None
    choice: ClusterChoice | None = None

    def by_client_id(self, ids: Sequence[int]) -> dict[int, int]:
        """Each client's cluster by the client's own id (``ids``, in client order), as
        ``clusters.json`` names them."""
        return dict(zip(map(int, ids), map(int, self.cluster_of), strict=True))

    def to_checkpoint(self) -> tuple[dict, dict]:
        tensors = len(self.models[0])
        arrays = {
            "models": [w for m in self.models for w in m],
            "cluster_of": [self.cluster_of],
            "splits": [_encode_split(pair, len(self.cluster_of)) for pair in self.previous_splits],
        }
        if self.late is not None:
            arrays["late"] = [self.late.astype(np.int64)]
        if self.choice is not None:
            arrays["cluster_choice"] = self.choice.to_arrays()
        return arrays, {"tensors": float(tensors)}

    @classmethod
    def from_checkpoint(cls, arrays: dict, scalars: dict) -> ClusterState:
        flat, tensors = arrays["models"], int(scalars["tensors"])
        models = [list(flat[i : i + tensors]) for i in range(0, len(flat), tensors)]
        splits = tuple(_decode_split(a) for a in arrays.get("splits", []))
        late = np.asarray(arrays["late"][0]).astype(bool) if "late" in arrays else None
        choice = (
            ClusterChoice.from_arrays(arrays["cluster_choice"])
            if "cluster_choice" in arrays
            else None
        )
        return cls(models, np.asarray(arrays["cluster_of"][0]), splits, late, choice)

    @staticmethod
    def schema(
        arrays: dict, spec: ModelSpec, num_clients: int, slots: int, tried: int = 0
    ) -> Schema:
        """What a checkpoint of this state holds for ``spec``'s model, ``num_clients``
        clients, at most ``slots`` clusters and (``--clusters auto``) ``tried`` K scored:
        :func:`checkpoint_shapes`."""
        return Schema(checkpoint_shapes(arrays, spec, num_clients, slots, tried))


def checkpoint_shapes(
    arrays: dict, spec: ModelSpec, num_clients: int, slots: int, tried: int = 0
) -> dict[str, list[tuple[int, ...]]]:
    """The shapes a checkpoint's arrays must have (:class:`ClusterState`): each cluster's
    model is ``spec``'s (as many whole models as it holds, at most ``slots``), one entry
    per client in the others, and with ``--clusters auto`` (``tried``: the K scored, 2..)
    the choice's three arrays."""
    model = [tuple(np.shape(w)) for w in spec.initial_weights().trainable]
    held = len(arrays.get("models", []))
    models = min(max(1, -(-held // len(model))), slots)  # a part of a model is a mismatch
    per_client = (num_clients,)
    return {
        "models": model * models,
        "cluster_of": [per_client],
        "splits": [per_client] * len(arrays.get("splits", [])),
        "late": [per_client],
        "cluster_choice": [(tried,), (tried,), (2,)],
    }


def _encode_split(pair: tuple, n: int) -> np.ndarray:
    code = np.zeros(n, dtype=np.int64)
    for side, members in enumerate(pair, 1):
        code[list(members)] = side
    return code


def _decode_split(code: np.ndarray) -> tuple:
    return tuple(frozenset(np.flatnonzero(code == side).tolist()) for side in (1, 2))


@dataclasses.dataclass
class Choice:
    """Which model each client trains this round (``cluster_of``, per client id; only the
    reporting clients' entries are used), the reporting clients that received every
    cluster's model to choose one by its loss (counted in the downlink), and AS-CFL's late
    clients after the choice (``None`` where a rule has none)."""

    cluster_of: np.ndarray
    received_every_model: np.ndarray
    late: np.ndarray | None = None


@dataclasses.dataclass
class Regrouped:
    """A rule's result of a round: the new cluster models and each reporting client's
    cluster (index into ``models``), with what the round's clustering found."""

    models: list[Weights]
    cluster_of: dict[int, int]
    rank: int | None = None
    splits: tuple = ()
    incentive_clusters: int | None = None  # AS-CFL: clusters Stage 1 formed
    adjustment: split_merge.Adjustment | None = None  # AS-CFL: Stage 2's pass (G_k and all)


# ``losses(client_ids)``: [clients, models] training losses of those clients under every
# current cluster model (IFCA's choice; AS-CFL's late clients)
Losses = Callable[[np.ndarray], np.ndarray]


@dataclasses.dataclass
class RoundUpdates:
    """What the server holds after the clients of round ``t`` trained: the cluster models of
    the round's start, the model each reporting client trained (``model_of``), their updates
    (``got``), the proxy accuracy of a model (``evaluate``), the round's generator and the
    previous round's splits (AS-CFL's no-reunite guard)."""

    t: int
    models: Sequence[Weights]
    model_of: dict[int, int]
    got: ClientUpdates
    evaluate: Callable[[Weights], float]
    rng: np.random.Generator
    previous_splits: tuple = ()

    @property
    def starts(self) -> list[Weights]:
        """The model each reporting client trained from, in the order of ``got``."""
        return [self.models[self.model_of[cid]] for cid in self.got.client_ids]

    @property
    def trained_in(self) -> np.ndarray:
        """The clusters the reporting clients trained in, in the order of ``got``."""
        return np.array([self.model_of[cid] for cid in self.got.client_ids], dtype=np.int64)

    @property
    def sizes(self) -> np.ndarray:
        """The reporting clients' numbers of training examples (float64)."""
        return self.got.examples.astype(np.float64)


class ClusterRule(Protocol):
    """How a clustered-FL method runs the shared round (the module text). A rule is built
    from its method's configuration (:func:`.rules.rule_of`) and reads it as ``config``."""

    config: ClusteredImageConfig
    spec: ModelSpec

    @property
    def slots(self) -> int:
        """Cluster models the round's TFF computation holds (at most this many clusters)."""

    @property
    def uses_losses(self) -> bool:
        """Whether :meth:`choose` may ask for the clients' losses under every model."""

    @property
    def per_client_epochs(self) -> bool:
        """Whether :meth:`epochs` gives each client its own number of local epochs (else
        every client trains ``config.local_epochs``)."""

    @property
    def absent_follow_renumbering(self) -> bool:
        """Whether a client that did not report follows its cluster when the rule renumbers
        the clusters (else it keeps its model's index: the rule keeps the models in place)."""

    @property
    def params(self) -> int:
        """Trainable parameters of the model (floats of one full update)."""

    def initial_models(self) -> list[Weights]:
        """The cluster models the run starts with."""

    def epochs(self, examples: Sequence[int]) -> list[int] | None:
        """Local epochs of clients with these numbers of training examples (``None``: every
        client trains ``config.local_epochs``)."""

    def choose(self, t: int, state: ClusterState, ids: np.ndarray, losses: Losses) -> Choice:
        """Which model each reporting client (``ids``) trains in round ``t``."""

    def regroup(self, round_: RoundUpdates) -> Regrouped:
        """The clusters of the round from the clients' updates, and their aggregated
        models."""

    def late_after(self, t: int, ids: np.ndarray, late: np.ndarray | None) -> np.ndarray | None:
        """The late clients after round ``t`` (AS-CFL's; ``None`` where a rule has none)."""

    def traffic(
        self, reporting: int, received_every_model: int, k: int, rank: int | None
    ) -> dict[str, float | str]:
        """The round's ``uplink_mb``, ``uplink_lowrank_mb`` and ``downlink_mb`` columns:
        ``reporting`` clients, of which ``received_every_model`` received all ``k`` models
        of the round's start; ``rank`` the low-rank step's (``None`` without one)."""


def reporting(config: ClusteredImageConfig, t: int) -> np.ndarray:
    """The clients that report in round ``t`` (all but a seeded ``client_dropout`` share)."""
    n = config.num_clients
    drop = n - config.reporting_clients
    rng = np.random.default_rng([config.seed, t, 1807])
    return np.sort(rng.permutation(n)[drop:])


class Evaluator:
    """Server-side accuracy of a model: on the proxy set, and on each client's test images."""

    def __init__(self, spec: ModelSpec, fed: RotatedFederatedData):
        self.model = spec.keras()
        self.fed = fed

    def _accuracy(self, weights: Weights, x: np.ndarray, y: np.ndarray) -> int:
        self.model.set_weights(weights)
        probs = self.model.predict(x, batch_size=512, verbose=0)
        return int(np.sum(np.argmax(probs, axis=-1) == y))

    def proxy(self, weights: Weights) -> float:
        return self._accuracy(weights, self.fed.proxy_x, self.fed.proxy_y) / len(self.fed.proxy_y)

    def clients(self, models: list[Weights], cluster_of: np.ndarray) -> np.ndarray:
        """``[clients, 2]``: correct predictions and test images per client."""
        out = np.zeros((len(cluster_of), 2), dtype=np.int64)
        for k, weights in enumerate(models):
            for c in np.flatnonzero(cluster_of == k):
                client = self.fed.clients[c]
                out[c] = self._accuracy(weights, client.x_test, client.y_test), len(client.y_test)
        return out


def _adjustment_columns(regrouped: Regrouped) -> dict:
    """AS-CFL's Stage 1 and 2 in numbers (empty for the baselines): clusters the incentive
    formed; the largest and the median ``G_k`` entering the split/merge pass (finite values
    only); splits made, splits the guard refused, merges made."""
    adjustment = regrouped.adjustment
    columns = {
        "incentive_clusters": ""
        if regrouped.incentive_clusters is None
        else regrouped.incentive_clusters,
        "g_max": "",
        "g_median": "",
        "splits": "",
        "refused_splits": "",
        "merges": "",
    }
    if adjustment is None:
        return columns
    ratio = adjustment.geometry.ratio
    finite = ratio[np.isfinite(ratio)]
    if finite.size:
        columns["g_max"] = round(float(finite.max()), 6)
        columns["g_median"] = round(float(np.median(finite)), 6)
    columns["splits"] = len(adjustment.splits)
    columns["refused_splits"] = adjustment.refused_splits
    columns["merges"] = len(adjustment.merges)
    return columns


class ClusteredRounds(Algorithm[ClusterState]):
    """What every round of a run needs, built once: the rule, the federation, the TFF
    computations and the evaluator; :meth:`step` is one round (the module text), on the
    shared loop (the run's wall time in every row's ``wall_s``)."""

    wall_column = "wall_s"

    def __init__(
        self,
        config: ClusteredImageConfig,
        rule: ClusterRule,
        fed: RotatedFederatedData,
        start: ChosenStart | None = None,
    ):
        """``start``: the choice and first clusters of the one-shot pass before round 1
        (``--clusters auto``, :mod:`.auto_clusters`; ``rule`` built with its K), whose
        traffic (every client's full update up and the model down, MB each way:
        ``pass_mb``) round 1's columns count; ``params``: the model's trainable parameters,
        which the run's summary records."""
        self.config, self.rule, self.fed, self.start = config, rule, fed, start
        self.params = rule.params
        self.pass_mb = 4 * self.params * config.num_clients / MB if start is not None else 0.0
        spec = rule.spec
        # One computation for the whole run, traced before the evaluator's Keras model exists
        # (tracing in a TF graph invalidates Keras models built before it): the server's
        # model stack has one slot per cluster the rule can form; unused slots repeat model 0.
        self.update_round = per_client.build_update_round(
            spec, 1 if rule.per_client_epochs else config.local_epochs, rule.slots
        )
        self.loss_round = None
        if rule.uses_losses:  # clients choose among the models by their loss
            self.loss_round = per_client.build_loss_round(spec, rule.slots)
        self.evaluator = Evaluator(spec, fed)
        groups = fed.group_of_client  # None: your clients came without ground-truth groups
        self.groups = None if groups is None else np.asarray(groups)

    def describe(self, t: int) -> str:
        config = self.config
        alpha = "" if is_user_file(config.dataset) else f" alpha={config.alpha:g}"
        return f"{config.method} {dataset_label(config.dataset)}{alpha}"

    def initial(self) -> ClusterState:
        start = self.start
        if start is None:
            return ClusterState(
                self.rule.initial_models(), np.zeros(self.config.num_clients, dtype=np.int64)
            )
        first = np.asarray(start.cluster_of, dtype=np.int64)
        return ClusterState(self.rule.initial_models(), first, choice=start.choice)

    def schema(self, arrays: dict) -> Schema:
        config, start = self.config, self.start
        scored = (
            0 if start is None else auto_clusters.tried(config.max_clusters, config.num_clients)
        )
        return ClusterState.schema(
            arrays, self.rule.spec, config.num_clients, self.rule.slots, scored
        )

    def restore(self, rounds_done: int, arrays: dict, scalars: dict) -> ClusterState:
        return ClusterState.from_checkpoint(arrays, scalars)

    def padded(self, models: Sequence[Weights]) -> list[Weights]:
        return list(models) + [models[0]] * (self.rule.slots - len(models))

    def losses(self, models: Sequence[Weights], ids: np.ndarray) -> np.ndarray:
        """[clients, models]: the training losses of clients ``ids`` under every model."""
        clients = [self.fed.clients[i] for i in ids]
        got = per_client.run_loss_round(self.loss_round, self.padded(models), clients)
        return got[:, : len(models)]

    def step(self, t: int, state: ClusterState) -> Step[ClusterState]:
        config, rule = self.config, self.rule
        lr = config.learning_rate * config.lr_decay ** (t - 1)
        ids = reporting(config, t)
        clients = [self.fed.clients[i] for i in ids]
        k = len(state.models)
        choice = rule.choose(t, state, ids, lambda chosen: self.losses(state.models, chosen))
        cluster_of = choice.cluster_of
        model_of = {int(i): int(cluster_of[i]) for i in ids}
        got = per_client.run_update_round(
            self.update_round,
            self.padded(state.models),
            lr,
            model_of,
            clients,
            t,
            config.seed,
            config.batch_size,
            rule.epochs([len(c.y_train) for c in clients]),
        )
        rng = np.random.default_rng([config.seed, t, 1808])
        regrouped = rule.regroup(
            RoundUpdates(
                t, state.models, model_of, got, self.evaluator.proxy, rng, state.previous_splits
            )
        )
        new_of = cluster_of.copy()
        if rule.absent_follow_renumbering:  # a non-reporting client follows its cluster
            remap = {}
            for cid, k_new in regrouped.cluster_of.items():
                remap.setdefault(int(cluster_of[cid]), k_new)
            for c in range(config.num_clients):
                if c in regrouped.cluster_of:
                    new_of[c] = regrouped.cluster_of[c]
                else:
                    new_of[c] = remap.get(int(cluster_of[c]), 0)
        else:
            for cid, k_new in regrouped.cluster_of.items():
                new_of[cid] = k_new
        late = rule.late_after(t, ids, choice.late)
        correct = self.evaluator.clients(regrouped.models, new_of)
        acc = correct[:, 0] / np.maximum(correct[:, 1], 1)
        rank = regrouped.rank
        traffic = rule.traffic(len(ids), len(choice.received_every_model), k, rank)
        if t == 1 and self.pass_mb:  # the one-shot pass of --clusters auto, before round 1
            for column in ("uplink_mb", "downlink_mb"):
                traffic[column] = round(float(traffic[column]) + self.pass_mb, 6)
        row = {
            "round": t,
            "lr": round(lr, 6),
            "acc": round(float(acc.mean()), 6),
            "acc_pooled": round(float(correct[:, 0].sum() / correct[:, 1].sum()), 6),
            "train_loss": round(float(np.average(got.loss, weights=got.examples)), 6),
            "clusters": len(set(new_of.tolist())),
            "ari": ""
            if self.groups is None
            else round(float(metrics.adjusted_rand_index(new_of, self.groups)), 6),
            "stability": round(float(metrics.membership_jaccard(state.cluster_of, new_of)), 6),
            **traffic,
            "rank": "" if rank is None else rank,
            "reporting": len(ids),
            **_adjustment_columns(regrouped),
        }
        new = ClusterState(regrouped.models, new_of, tuple(regrouped.splits), late, state.choice)
        postfix = {"acc": f"{row['acc']:.3f}", "K": str(row["clusters"])}
        return Step(new, [row], postfix)


def full_traffic(
    params: int, reporting: int, received_every_model: int, k: int
) -> dict[str, float | str]:
    """The traffic of a round without compression (MB of float32): every reporting client
    uploads its full update and receives its cluster's model, or all ``k`` models of the
    round's start where it chose one of them by its loss."""
    return {
        "uplink_mb": round(4 * params * reporting / MB, 6),
        "uplink_lowrank_mb": "",
        "downlink_mb": round(4 * params * (reporting + received_every_model * (k - 1)) / MB, 6),
    }


def privacy_record(config: ClusteredImageConfig, rounds: int) -> dict:
    """The summary's ``privacy`` where the run adds noise (else nothing): the client-level
    (ε, δ) of its ``rounds`` noisy aggregations at δ = :data:`DELTA`, each round sampling
    the clients that report (:func:`fedprune.privacy.accounting.privacy_spent`)."""
    if not config.noise_multiplier > 0:
        return {}
    spent = accounting.privacy_spent(
        config.noise_multiplier, rounds, DELTA, sampling_rate=1.0 - config.client_dropout
    )
    return {"privacy": {"epsilon": float(spent.epsilon), "delta": DELTA}}
