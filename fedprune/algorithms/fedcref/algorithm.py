"""FedCRef: Federated Cluster Refinement (FedCRef paper, Algorithm 1).

Input: each client's unlabeled samples, its number of local clusters K_i and an initial
local clustering. Per iteration:

1. every *active* client trains one autoencoder per local cluster (lines 7-9),
2. all cluster models are exchanged; every pair of clusters of different clients is tested
   for bidirectional association (lines 10-17, :mod:`.association`),
3. the association graph's connected components with >= 2 clusters are communities, the
   rest isolated clusters (lines 18-21, :mod:`.graph`); one autoencoder per community is
   trained with FedAvg on TFF over its member clusters (lines 22-24, :mod:`.community_training`),
4. every active client refines its clusters with its own and the community models
   (Algorithm 2, :mod:`.refinement`) and leaves the active set once ACC(previous, new) >= tau
   (lines 27-31); a cluster the refinement leaves empty is dropped from the next exchange
   (:func:`drop_empty_clusters`),

until no client is active or the counts of communities and isolated clusters are stable
(Phase 5, :mod:`.stopping`), or ``max_iterations`` (our safety cap) is reached.

The paper's text and Algorithm 1 disagree on the stop: line 6 loops "while (varying I and G)
or |A| > 0" (stop only when both hold), Phase 5's text says the process "concludes when either
no active clients remain ... or the global stopping condition is satisfied". We follow the
text: once no client is active nothing can change any more (stabilized clients neither
retrain nor refine), so further iterations would only repeat the same graph. A consequence
measured at dirtiness 0: every client is stable after the first refinement, so the run ends
after one iteration.

The autoencoder of every model (local, community) is the paper's or your own (``model``, a
:class:`~fedprune.models.user.UserModel`); reconstruction errors are per-sample mean squared
errors either way (:meth:`.local_models.LocalTrainer.errors`).

No ground-truth label enters this module: evaluation happens in the caller's
``on_iteration`` callback. The all-to-all error matrix is computed in one place as a
simulation shortcut; each of its blocks is what the owning client computes with a received
model on its own samples. Stabilized clients keep their last models and clusters and still
take part in the exchange and the community training (Phase 5).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from tqdm import tqdm

from fedprune.algorithms.fedcref.association import association_edges
from fedprune.algorithms.fedcref.community_training import CommunityTrainer
from fedprune.algorithms.fedcref.graph import communities_of
from fedprune.algorithms.fedcref.local_models import LocalTrainer, cluster_seed
from fedprune.algorithms.fedcref.refinement import align_labels, refine
from fedprune.algorithms.fedcref.stopping import GlobalStop, is_stable
from fedprune.configs.fedcref import FedCRefConfig
from fedprune.engine import interrupts
from fedprune.engine.loop import Schema
from fedprune.errors import ConfigError, DataError
from fedprune.models.user import UserModel


@dataclasses.dataclass
class FedCRefState:
    """Everything needed to continue after ``iteration`` finished iterations."""

    iteration: int
    assignments: list[np.ndarray]
    active: np.ndarray  # bool per client
    models: dict[tuple[int, int], list[np.ndarray]]  # (client, cluster) -> weights
    stop_history: list[tuple[int, int]]
    community_models: list[list[np.ndarray]] = dataclasses.field(default_factory=list)
    done: bool = False
    stop_reason: str = ""

    def to_checkpoint(self) -> tuple[dict[str, list[np.ndarray]], dict[str, float]]:
        keys = sorted(self.models)
        arrays = {
            "assignments": self.assignments,
            "active": [self.active.astype(np.int8)],
            "model_keys": [np.array(keys, dtype=np.int64).reshape(-1, 2)],
            "model_weights": [w for k in keys for w in self.models[k]],
            "community_weights": [w for m in self.community_models for w in m],
            "stop_history": [np.array(self.stop_history, dtype=np.int64).reshape(-1, 2)],
            # a run interrupted after its last iteration's checkpoint must not train one more
            # on resume: the stop decision is part of the state
            "stop": [np.array(self.stop_reason if self.done else "")],
        }
        return arrays, {}

    @classmethod
    def from_checkpoint(
        cls, iteration: int, arrays: Mapping[str, list[np.ndarray]], where: str
    ) -> FedCRefState:
        """The state after ``iteration`` iterations from :meth:`to_checkpoint`'s arrays
        (``where`` names the file in the error of an inconsistent checkpoint)."""
        keys = [tuple(map(int, k)) for k in arrays["model_keys"][0]]
        flat = arrays["model_weights"]
        per_model = len(flat) // max(len(keys), 1)  # weight arrays per autoencoder
        cw = arrays.get("community_weights", [])
        if not keys or per_model * len(keys) != len(flat) or len(cw) % per_model:
            raise DataError(f"{where} is inconsistent; delete it to start over")
        models = {k: flat[per_model * n : per_model * (n + 1)] for n, k in enumerate(keys)}
        reason = str(arrays["stop"][0]) if "stop" in arrays else ""  # older ones: not done
        return cls(
            iteration=iteration,
            assignments=[a.astype(np.int64) for a in arrays["assignments"]],
            active=arrays["active"][0].astype(bool),
            models=models,
            stop_history=[tuple(map(int, h)) for h in arrays["stop_history"][0]],
            community_models=[cw[i : i + per_model] for i in range(0, len(cw), per_model)],
            done=bool(reason),
            stop_reason=reason,
        )


@dataclasses.dataclass(frozen=True)
class IterationReport:
    """What one iteration produced, for the caller's evaluation and logging."""

    iteration: int
    clusters: list[tuple[int, int]]  # (client, local cluster) of every graph node
    members: list[np.ndarray]  # each node's sample indices into its client's data
    edges: list[tuple[int, int]]
    communities: list[list[int]]
    isolated: list[int]
    state: FedCRefState
    seconds: float


def drop_empty_clusters(
    models: dict[tuple[int, int], list[np.ndarray]], assignments: Sequence[np.ndarray]
) -> list[tuple[int, int]]:
    """Delete from ``models`` the model of every cluster that holds no sample; returns the
    (client, cluster) keys dropped, sorted.

    Algorithm 2 can leave clusters empty. Its loop (lines 6-14) forms H_p from the votes of
    the still unassigned samples R. Once one model has won every vote, or the client has run
    out of candidate models, R is empty and the remaining H_p stay empty, and line 16 gives
    left-over samples only to clusters already formed. The paper never re-seeds or merges
    such a cluster, so it is *dropped*: an empty cluster has no model (line 8 trains
    M_iq on Q_iq's samples) and is no vertex of the graph Γ (the association test, lines
    11-14 and Eq. 2, is a percentile over the cluster's own samples, which do not exist).
    Its id stays: a later refinement of an active client, which forms K_i clusters again
    (Alg. 2 line 6), may fill it.

    Active clients never keep such a model (Phase 1 trains only non-empty clusters). A
    client that becomes stable in the refinement that empties a cluster (Alg. 1 lines
    29-30) keeps its last models (Phase 5) without retraining, so without this step its
    model of the now-empty cluster would take part in the next exchange.
    """
    dropped = sorted((i, q) for i, q in models if not np.any(np.asarray(assignments[i]) == q))
    for key in dropped:
        del models[key]
    return dropped


def validate_inputs(xs: Sequence[np.ndarray], ks: Sequence[int], initial: Sequence) -> None:
    """One clear error for inconsistent clients, cluster counts or initial clusterings."""
    if not len(xs) == len(ks) == len(initial):
        raise ConfigError("need one sample array, one K_i and one initial clustering per client")
    if len(xs) < 2:
        raise ConfigError(f"FedCRef needs at least 2 clients, got {len(xs)}")
    for i, (x, k, a) in enumerate(zip(xs, ks, initial)):
        if k < 1 or len(a) != len(x):
            raise ConfigError(f"client {i}: K_i={k} with {len(a)} assignments for {len(x)} samples")
        if np.any(a < 0) or np.any(a >= k):
            raise ConfigError(f"client {i}: initial cluster ids must be in [0, {k - 1}]")


class FedCRef:
    """Algorithm 1 over fixed clients: ``xs`` (samples), ``ks`` (K_i) and the ``initial``
    local clusterings. :meth:`initial_state` is iteration 0; :meth:`iterate` runs one
    iteration (lines 7-32) on a state, e.g. as the step of the shared loop
    (:class:`fedprune.algorithms.fedcref.experiment.FedCRefIterations`).
    ``progress`` receives one line per phase of an iteration; ``model`` is the autoencoder
    (the paper's, or your :class:`~fedprune.models.user.UserModel`)."""

    def __init__(
        self,
        xs: Sequence[np.ndarray],
        ks: Sequence[int],
        initial: Sequence[np.ndarray],
        config: FedCRefConfig,
        progress: Callable[[str], None] | None = None,
        *,
        model: str | UserModel = "autoencoder",
        bars: bool = False,
    ):
        validate_inputs(xs, ks, initial)
        self.xs, self.ks, self.initial, self.config = xs, ks, initial, config
        self.say = progress or (lambda _msg: None)
        self.bars = bars  # a progress bar over each iteration's local models
        input_dim = int(np.asarray(xs[0]).shape[1])
        self.fl = CommunityTrainer(
            input_dim,
            config.fl_rounds,
            config.fl_local_epochs,
            config.batch_size,
            config.learning_rate,
            config.seed,
            model=model,
        )
        # built after the TFF process: TFF's graph-mode model building invalidates earlier
        # models
        self.trainer = LocalTrainer(
            input_dim, config.local_epochs, config.batch_size, config.learning_rate, model=model
        )
        self.offsets = np.concatenate([[0], np.cumsum([len(x) for x in xs])])
        self.everything = np.concatenate([np.asarray(x, np.float32) for x in xs])
        interrupts.raise_if_received()  # tracing the TFF process can swallow a Ctrl-C

    def initial_state(self) -> FedCRefState:
        return FedCRefState(
            iteration=0,
            assignments=[np.asarray(a, np.int64).copy() for a in self.initial],
            active=np.ones(len(self.xs), dtype=bool),
            models={},
            stop_history=[],
        )

    def checkpoint_shapes(
        self, arrays: Mapping[str, list[np.ndarray]]
    ) -> dict[str, list[tuple[int, ...]]]:
        """The shapes :meth:`FedCRefState.to_checkpoint`'s arrays have for these clients and
        this autoencoder (``arrays``: the checkpoint's, for how many models it holds)."""
        model = [tuple(w.shape) for w in self.trainer.model.get_weights()]
        keys = len(arrays["model_keys"][0]) if "model_keys" in arrays else 0
        communities = len(arrays.get("community_weights", [])) // len(model)
        return {
            "assignments": [(len(x),) for x in self.xs],
            "active": [(len(self.xs),)],
            "model_keys": [(keys, 2)],
            "model_weights": model * keys,
            "community_weights": model * communities,
        }

    def schema(self, arrays: Mapping[str, list[np.ndarray]]) -> Schema:
        """What a checkpoint of :class:`FedCRefState` holds for these clients: the shapes of
        :meth:`checkpoint_shapes`, and each client's local cluster numbers below its K_i."""
        return Schema(self.checkpoint_shapes(arrays), {"assignments": list(self.ks)})

    def iterate(self, state: FedCRefState) -> IterationReport:
        """Iteration ``state.iteration + 1``, updating ``state`` in place (``done`` and
        ``stop_reason`` set when Phase 5 stops the run)."""
        config, xs, ks = self.config, self.xs, self.ks
        t = state.iteration + 1
        started = time.perf_counter()
        stop = GlobalStop(config.stop_window, config.stop_tolerance, list(state.stop_history))
        # Phase 1: local cluster models of the active clients (line 8)
        local = [(int(i), q) for i in np.flatnonzero(state.active) for q in range(ks[i])]
        bar = tqdm(
            total=len(local),
            desc=f"iteration {t}: local cluster models",
            unit="model",
            leave=False,
            disable=not self.bars,
        )
        for i, q in local:
            state.models.pop((i, q), None)
            rows = np.flatnonzero(state.assignments[i] == q)
            if len(rows):
                seed = cluster_seed(config.seed, t, i, q)
                state.models[(i, q)] = self.trainer.fit(xs[i][rows], seed)
            bar.update(1)
        bar.close()
        self.say(f"iteration {t}: local models of {int(state.active.sum())} active clients")
        interrupts.raise_if_received()
        # Phase 2: all-to-all exchange and bidirectional association (lines 10-17) among
        # the non-empty clusters (also where a stable client's last refinement emptied one)
        drop_empty_clusters(state.models, state.assignments)
        clusters = sorted(state.models)
        members = [np.flatnonzero(state.assignments[i] == q) for i, q in clusters]
        global_rows = [self.offsets[i] + m for (i, _), m in zip(clusters, members)]
        errors = np.stack([self.trainer.errors(state.models[c], self.everything) for c in clusters])
        edges = association_edges(
            errors, global_rows, [i for i, _ in clusters], config.alpha, config.theta
        )
        # Phase 3: communities and their federated models (lines 18-24)
        groups, isolated = communities_of(len(clusters), edges)
        self.say(f"iteration {t}: {len(edges)} associations, {len(groups)} communities; FedAvg")
        community_data = [[xs[clusters[c][0]][members[c]] for c in g] for g in groups]
        # checked before the TFF calls too: they start a new record of SIGINT
        interrupts.raise_if_received()
        state.community_models = self.fl.train(community_data, t)
        interrupts.raise_if_received()
        # Phase 4: refinement and stability of the active clients (lines 25-32)
        for i in np.flatnonzero(state.active):
            own = [state.models[(int(i), q)] for q in range(ks[i]) if (int(i), q) in state.models]
            candidates = [*own, *state.community_models]
            errs = np.stack([self.trainer.errors(w, xs[i]) for w in candidates])
            new = align_labels(state.assignments[i], refine(errs, ks[i]), ks[i])
            if is_stable(state.assignments[i], new, config.tau):
                state.active[i] = False
            state.assignments[i] = new
        interrupts.raise_if_received()
        # Phase 5: global stop
        stable = stop.update(len(groups), len(isolated))
        state.stop_history = list(stop.history)
        state.iteration = t
        if not state.active.any():
            state.done, state.stop_reason = True, "no active clients"
        elif stable:
            state.done, state.stop_reason = True, "communities and isolated clusters stable"
        elif t >= config.max_iterations:
            state.done, state.stop_reason = True, f"max_iterations={config.max_iterations}"
        return IterationReport(
            t, clusters, members, edges, groups, isolated, state, time.perf_counter() - started
        )
