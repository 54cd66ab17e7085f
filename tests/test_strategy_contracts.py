"""Contracts every registered strategy keeps, checked over the registries themselves (a new
registration is covered without touching this file): the pipeline's mask policies
(:data:`fedprune.configs.pipeline.MASK_POLICIES`), the clustered round's rules
(:data:`fedprune.algorithms.ascfl.rules.RULES`) and the one-shot clusterers
(:data:`fedprune.configs.fedhire.CLUSTERERS`).

* a mask policy, driven through Phase 3 the way the pipeline drives it (the clients train
  under the mask, :func:`~fedprune.algorithms.pipeline.policy.update_masks` then
  :func:`~fedprune.sparsity.masks.apply` after each scoring round), gives 0/1 masks of its
  weights' shapes, 1 outside ``--prune-layers``; masked weights are 0 after every round; the
  pruned kernels are at the target sparsity after the last scoring round, and stay there;
* a rule gives every reporting client a model to train and, from their updates, a cluster
  of the round's models to each reporting client and no other, for several rounds with
  clients missing;
* a clusterer labels each client's every object with a cluster in ``0 .. k*-1``, and the
  same seed gives the same labels.

Inputs are small and synthetic: updates drawn around two directions, three Gaussian blobs.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import fedprune.algorithms.fedhire.clusterers  # noqa: F401 (registers the clusterers)
import fedprune.algorithms.pipeline.policies  # noqa: F401 (registers the mask policies)
from fedprune.algorithms.ascfl.compose import ClusterState, RoundUpdates, reporting
from fedprune.algorithms.ascfl.rules import RULES, rule_of
from fedprune.algorithms.pipeline.policy import update_masks
from fedprune.configs.ascfl import ClusteredImageConfig
from fedprune.configs.fedhire import CLUSTERERS, FedHireConfig
from fedprune.configs.pipeline import MASK_POLICIES, PipelineConfig
from fedprune.sparsity import masks as M


def _public_subclasses(base: type) -> list[type]:
    found, todo = [base], list(base.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if not cls.__name__.startswith("_") and cls.__module__.startswith("fedprune."):
            found.append(cls)
    return sorted(set(found), key=lambda c: c.__name__)


def _name(cls: type) -> str:
    return cls.__name__


def _config(cls: type, dataset: str) -> object:
    """``cls`` with its defaults, given a ``dataset`` where it has none."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    needs = fields["dataset"].default is dataclasses.MISSING
    return cls(dataset=dataset) if needs else cls()


# --- mask policies ---------------------------------------------------------------------------

POLICIES = list(MASK_POLICIES.registered().items())
SHAPES = [(3, 4, 8), (8,), (16, 6), (6,)]  # conv kernel, bias, dense kernel, bias
SCOPE = [True, False, True, False]  # the kernels are pruned
T2, FREQUENCY = 6, 2


def test_every_pipeline_method_has_a_mask_policy():
    for cls in _public_subclasses(PipelineConfig):
        MASK_POLICIES.of(_config(cls, "uci_har"))  # LookupError for a method without one
    assert len(POLICIES) >= 4  # CA-AFP's, FedCHAR's (none), EfficientFL's, FedSNIP's


@pytest.mark.parametrize(("config_class", "factory"), POLICIES, ids=[_name(c) for c, _ in POLICIES])
def test_a_mask_policy_keeps_masked_weights_zero_and_reaches_its_target(config_class, factory):
    config = dataclasses.replace(
        _config(config_class, "uci_har"), phases=(1, 1, T2), prune_frequency=FREQUENCY
    )
    if factory is None:  # a dense method
        assert config.policy() is None
        return
    policy = factory(config)
    rng = np.random.default_rng(0)
    weights = [rng.normal(size=shape).astype(np.float32) for shape in SHAPES]
    masks = [np.ones(shape, np.float32) for shape in SHAPES]
    kernels = sum(int(np.prod(s)) for s, pruned in zip(SHAPES, SCOPE) if pruned)
    scored = []
    for t in range(1, T2 + 1):
        trained = [w + rng.normal(scale=0.05, size=w.shape).astype(np.float32) for w in weights]
        aggregated = M.apply(trained, masks)  # the clients train w ⊙ M under the mask
        if policy.scoring_round(t):
            stats = {
                "w": aggregated,
                "w2": [a**2 + 0.01 for a in aggregated],
                "grad_sign": [np.sign(rng.normal(size=a.shape)) for a in aggregated],
                "grad": [rng.normal(size=a.shape).astype(np.float32) for a in aggregated],
            }
            masks = update_masks(policy, t, weights, aggregated, masks, stats, SCOPE)
            aggregated = M.apply(aggregated, masks)
            scored.append(t)
        weights = aggregated
        for w, m, pruned in zip(weights, masks, SCOPE):
            assert m.shape == w.shape and set(np.unique(m)) <= {0.0, 1.0}
            assert pruned or m.all()  # weights outside --prune-layers keep mask 1
            assert not w[m == 0].any()  # masked weights are 0
        if scored and t == scored[-1]:
            at_last_scoring = [m.copy() for m in masks]
    assert scored, "a pruning policy scores at least once in Phase 3"
    pruned_masks = [m for m, pruned in zip(at_last_scoring, SCOPE) if pruned]
    assert M.sparsity(pruned_masks) == pytest.approx(config.target_sparsity, abs=2 / kernels)
    assert all(np.array_equal(a, b) for a, b in zip(at_last_scoring, masks))


# --- cluster rules ---------------------------------------------------------------------------

RULE_CLASSES = list(RULES)


@pytest.fixture(scope="module")
def spec():
    from fedprune.models.spec import ModelSpec

    return ModelSpec((28, 28, 1), 10, seed=0, model="image_cnn_small")


def test_every_clustered_method_has_a_rule(spec):
    for cls in _public_subclasses(ClusteredImageConfig):
        rule_of(cls(), spec)  # TypeError for a method without one


def _updates(rule, ids: np.ndarray, rng: np.random.Generator):
    from fedprune.engine.per_client import ClientUpdates

    directions = [[rng.normal(size=s).astype(np.float32) for s in rule.shapes] for _ in range(2)]
    updates = [
        [d + rng.normal(scale=0.05, size=d.shape).astype(np.float32) for d in directions[c % 2]]
        for c in ids
    ]
    n = len(ids)
    return ClientUpdates([int(c) for c in ids], updates, np.full(n, 30), np.ones(n), np.zeros(n))


@pytest.mark.parametrize("config_class", RULE_CLASSES, ids=[_name(c) for c in RULE_CLASSES])
def test_a_rule_places_every_reporting_client_and_only_those(config_class, spec):
    config = dataclasses.replace(
        config_class(), num_clients=8, client_dropout=0.25, warmup_rounds=1
    )
    rule = rule_of(config, spec)
    state = ClusterState(rule.initial_models(), np.zeros(config.num_clients, dtype=np.int64))
    rng = np.random.default_rng(0)
    for t in range(1, 5):
        ids = reporting(config, t)
        assert 0 < len(ids) < config.num_clients  # some clients are missing
        k = len(state.models)
        losses = lambda chosen, k=k: rng.random((len(chosen), k))  # noqa: E731
        choice = rule.choose(t, state, ids, losses)
        assert all(0 <= choice.cluster_of[i] < k for i in ids)
        model_of = {int(i): int(choice.cluster_of[i]) for i in ids}
        round_ = RoundUpdates(
            t,
            state.models,
            model_of,
            _updates(rule, ids, rng),
            lambda weights: 0.5,
            np.random.default_rng([t]),
            state.previous_splits,
        )
        regrouped = rule.regroup(round_)
        assert sorted(regrouped.cluster_of) == sorted(int(i) for i in ids)
        assert 1 <= len(regrouped.models) <= rule.slots
        assert all(0 <= c < len(regrouped.models) for c in regrouped.cluster_of.values())
        for model in regrouped.models:
            assert [tuple(w.shape) for w in model] == rule.shapes
        new_of = choice.cluster_of.copy()  # as the clustered round does (compose.py)
        if rule.absent_follow_renumbering:
            remap = {}
            for cid, c in regrouped.cluster_of.items():
                remap.setdefault(int(choice.cluster_of[cid]), c)
            for cid in range(config.num_clients):
                new_of[cid] = regrouped.cluster_of.get(cid, remap.get(int(new_of[cid]), 0))
        else:
            for cid, c in regrouped.cluster_of.items():
                new_of[cid] = c
        assert new_of.min() >= 0 and new_of.max() < len(regrouped.models)
        late = rule.late_after(t, ids, choice.late)
        state = ClusterState(regrouped.models, new_of, tuple(regrouped.splits), late)


# --- clusterers ------------------------------------------------------------------------------

CLUSTERER_CLASSES = list(CLUSTERERS.registered().items())


def test_every_clustering_method_has_a_clusterer():
    for cls in _public_subclasses(FedHireConfig):
        CLUSTERERS.of(_config(cls, "ecoli"))  # LookupError for a method without one


def _blobs(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0, 0.0, 0.0], [6.0, 6.0, 0.0, 0.0], [0.0, 6.0, 6.0, 6.0]])
    clients = []
    for size in (14, 11, 17):
        which = rng.integers(3, size=size)
        clients.append(centres[which] + rng.normal(scale=0.5, size=(size, 4)))
    return clients


@pytest.mark.parametrize(
    ("config_class", "clusterer_class"),
    CLUSTERER_CLASSES,
    ids=[_name(c) for c, _ in CLUSTERER_CLASSES],
)
def test_a_clusterer_labels_every_object_in_range_and_repeats_for_a_seed(
    config_class, clusterer_class, tff_context
):
    config = _config(config_class, "ecoli")
    if hasattr(config, "rounds"):
        config = dataclasses.replace(config, rounds=2)  # a multi-round method: keep it short
    clusterer = config.clusterer()
    assert isinstance(clusterer, clusterer_class)
    client_x, k_star = _blobs(0), 3
    first = clusterer.cluster(client_x, k_star, seed=4)
    assert len(first.labels) == len(client_x)
    for labels, x in zip(first.labels, client_x):
        assert labels.shape == (len(x),) and labels.dtype == np.int64
        assert labels.min() >= 0 and labels.max() < k_star
    assert first.bytes_uploaded > 0 and first.bytes_downloaded >= 0
    again = clusterer.cluster(client_x, k_star, seed=4)
    for a, b in zip(first.labels, again.labels):
        np.testing.assert_array_equal(a, b)
