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
   (lines 27-31),

until no client is active or the counts of communities and isolated clusters are stable
(Phase 5, :mod:`.stopping`), or ``max_iterations`` (our safety cap) is reached.

The paper's text and Algorithm 1 disagree on the stop: line 6 loops "while (varying I and G)
or |A| > 0" (stop only when both hold), Phase 5's text says the process "concludes when either
no active clients remain ... or the global stopping condition is satisfied". We follow the
text: once no client is active nothing can change any more (stabilized clients neither
retrain nor refine), so further iterations would only repeat the same graph. A consequence
measured at dirtiness 0: every client is stable after the first refinement, so the run ends
after one iteration.

No ground-truth label enters this module: evaluation happens in the caller's
``on_iteration`` callback. The all-to-all error matrix is computed in one place as a
simulation shortcut; each of its blocks is what the owning client computes with a received
model on its own samples. Stabilized clients keep their last models and clusters and still
take part in the exchange and the community training (Phase 5).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

import numpy as np

from fedprune.algorithms.fedcref.association import association_edges, check_thresholds
from fedprune.algorithms.fedcref.community_training import CommunityTrainer
from fedprune.algorithms.fedcref.graph import communities_of
from fedprune.algorithms.fedcref.local_models import LocalTrainer, cluster_seed
from fedprune.algorithms.fedcref.refinement import align_labels, refine
from fedprune.algorithms.fedcref.stopping import GlobalStop, is_stable
from fedprune.checks import check_count, check_positive, check_seed
from fedprune.errors import ConfigError
from fedprune.models.autoencoder import reconstruction_errors


@dataclasses.dataclass(frozen=True)
class FedCRefConfig:
    """Hyper-parameters; defaults are the paper's Table 1-2 (alpha, theta, tau, epochs,
    FL rounds) and our choices where it is silent (batch size, learning rate, FL local
    epochs, iteration cap, stop window/tolerance from Phase 5's "10 % over three
    consecutive iterations")."""

    alpha: float = 75.0
    theta: float = 0.2
    tau: float = 0.8
    local_epochs: int = 20
    fl_rounds: int = 15
    fl_local_epochs: int = 1
    batch_size: int = 32
    learning_rate: float = 1e-3
    max_iterations: int = 30
    stop_window: int = 3
    stop_tolerance: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        check_thresholds(self.alpha, self.theta)
        if not 0 <= self.tau <= 1:
            raise ConfigError(f"tau (stability threshold) must be in [0, 1], got {self.tau}")
        for name in ("local_epochs", "fl_rounds", "fl_local_epochs", "batch_size"):
            check_count(name, getattr(self, name))
        check_count("max_iterations", self.max_iterations)
        check_positive("lr", self.learning_rate)
        check_seed(self.seed)


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


def run_fedcref(
    xs: Sequence[np.ndarray],
    ks: Sequence[int],
    initial: Sequence[np.ndarray],
    config: FedCRefConfig,
    on_iteration: Callable[[IterationReport], None] | None = None,
    state: FedCRefState | None = None,
    progress: Callable[[str], None] | None = None,
) -> FedCRefState:
    """Run Algorithm 1 from ``initial`` (or continue from ``state``); returns the final state."""
    validate_inputs(xs, ks, initial)
    say = progress or (lambda _msg: None)
    input_dim = int(np.asarray(xs[0]).shape[1])
    fl = CommunityTrainer(
        input_dim,
        config.fl_rounds,
        config.fl_local_epochs,
        config.batch_size,
        config.learning_rate,
        config.seed,
    )
    # built after the TFF process: TFF's graph-mode model building invalidates earlier models
    trainer = LocalTrainer(input_dim, config.local_epochs, config.batch_size, config.learning_rate)
    if state is None:
        state = FedCRefState(
            iteration=0,
            assignments=[np.asarray(a, np.int64).copy() for a in initial],
            active=np.ones(len(xs), dtype=bool),
            models={},
            stop_history=[],
        )
    stop = GlobalStop(config.stop_window, config.stop_tolerance, list(state.stop_history))
    offsets = np.concatenate([[0], np.cumsum([len(x) for x in xs])])
    everything = np.concatenate([np.asarray(x, np.float32) for x in xs])

    while not state.done:
        t = state.iteration + 1
        started = time.perf_counter()
        # Phase 1: local cluster models of the active clients (line 8)
        for i in np.flatnonzero(state.active):
            for q in range(ks[i]):
                state.models.pop((int(i), q), None)
                rows = np.flatnonzero(state.assignments[i] == q)
                if len(rows):
                    seed = cluster_seed(config.seed, t, int(i), q)
                    state.models[(int(i), q)] = trainer.fit(xs[i][rows], seed)
            say(f"iteration {t}: local models of {int(state.active.sum())} active clients")
        # Phase 2: all-to-all exchange and bidirectional association (lines 10-17)
        clusters = sorted(state.models)
        members = [np.flatnonzero(state.assignments[i] == q) for i, q in clusters]
        global_rows = [offsets[i] + m for (i, _), m in zip(clusters, members)]
        errors = np.stack([reconstruction_errors(state.models[c], everything) for c in clusters])
        edges = association_edges(
            errors, global_rows, [i for i, _ in clusters], config.alpha, config.theta
        )
        # Phase 3: communities and their federated models (lines 18-24)
        groups, isolated = communities_of(len(clusters), edges)
        say(f"iteration {t}: {len(edges)} associations, {len(groups)} communities; FedAvg")
        community_data = [[xs[clusters[c][0]][members[c]] for c in g] for g in groups]
        state.community_models = fl.train(community_data, t)
        # Phase 4: refinement and stability of the active clients (lines 25-32)
        for i in np.flatnonzero(state.active):
            own = [state.models[(int(i), q)] for q in range(ks[i]) if (int(i), q) in state.models]
            candidates = [*own, *state.community_models]
            errs = np.stack([reconstruction_errors(w, xs[i]) for w in candidates])
            new = align_labels(state.assignments[i], refine(errs, ks[i]), ks[i])
            if is_stable(state.assignments[i], new, config.tau):
                state.active[i] = False
            state.assignments[i] = new
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
        if on_iteration is not None:
            on_iteration(
                IterationReport(
                    t,
                    clusters,
                    members,
                    edges,
                    groups,
                    isolated,
                    state,
                    time.perf_counter() - started,
                )
            )
    return state
