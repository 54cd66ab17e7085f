"""ClusterFL baseline (Ouyang et al., MobiSys 2021; CA-AFP paper's [27]), dense.

Clustered multi-task learning: one model w_i per client, coupled through a cluster structure,

    min_{W, F}  sum_i f_i(w_i) + alpha tr(W W^T) - beta tr(F^T W W^T F),   F^T F = I,

with W the (clients x parameters) matrix of models and F a normalized cluster indicator
(F_ic = 1/sqrt(n_c) for the clients of cluster c). It is solved by ADMM-style alternating
updates with an auxiliary Omega = W and scaled duals U (penalty rho):

1. local step (the sampled clients, as a TFF round each):
   w_i <- argmin f_i(w_i) + rho/2 ||w_i - (Omega_i - U_i)||², E epochs of Adam from the
   client's current w_i (the proximal client work of the shared engine);
2. Omega step (server, closed form over the client dimension):
   Omega = rho [(2 alpha + rho) I - 2 beta F F^T]^{-1} (W + U);
3. cluster step (server): the top-K eigenvectors of Omega Omega^T, rows clustered by k-means
   (scikit-learn), F the normalized indicator of those K clusters;
4. dual step: U <- U + W - Omega.

rho = 5e-3, alpha = 1e-3, beta = 5e-4, K = 3 (the CA-AFP paper's Tables 5-6).

Interpretations (this follows the ClusterFL paper's published formulation as summarized
above): clients are sampled 10 per round as for every method, and
the server steps use the latest W and U of all clients; the models start from the common
initialization with Omega = W and U = 0, and the first Omega step treats all clients as one
cluster (F from the first cluster step on); the deployed personal model of a client is its
w_i, fine-tuned like every method's (3 and 25 epochs). Every round each sampled client
downloads Omega_i - U_i and uploads w_i, both dense (Eq. 13). The straggler-dropout and
node-selection parts of ClusterFL (for slow devices) are not simulated.

A run (:func:`run_clusterfl`) is :class:`ClusterFLRun` on the run composer
(:mod:`fedprune.engine.compose`), its rounds :class:`ClusterFLRounds` on the shared loop.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow_federated as tff
from sklearn.cluster import KMeans

from fedprune.algorithms.caafp.communication import CommAccounts
from fedprune.algorithms.personal import PersonalRun
from fedprune.configs.clusterfl import ClusterFLConfig
from fedprune.configs.protocol import dataset_label
from fedprune.data.partition import FederatedData
from fedprune.engine.client_work import LocalTraining
from fedprune.engine.compose import write_clustering
from fedprune.engine.loop import Algorithm, RoundsResult, Schema, Step
from fedprune.engine.process import build_learning_process, with_client_work_state
from fedprune.engine.rounds import run_rounds_concurrently, sample_clients
from fedprune.models.spec import ModelSpec
from fedprune.runs import RunDir, artefacts, names
from fedprune.runs.files import damaged
from fedprune.runs.finished import FinishedRun
from fedprune.sparsity.layers import kernel_flags, select


def omega_step(
    w: np.ndarray, u: np.ndarray, f: np.ndarray, rho: float, alpha: float, beta: float
) -> np.ndarray:
    """Omega = rho [(2 alpha + rho) I - 2 beta F F^T]^{-1} (W + U), rows are clients."""
    n = len(w)
    system = (2 * alpha + rho) * np.eye(n) - 2 * beta * f @ f.T
    return rho * np.linalg.solve(system, w + u)


def cluster_step(omega: np.ndarray, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(labels, normalized indicator F) from the top-k eigenvectors of Omega Omega^T."""
    n = len(omega)
    k = min(k, n)
    gram = omega @ omega.T
    _, vectors = np.linalg.eigh(gram)
    embedding = vectors[:, -k:]
    labels = KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(embedding)
    order = {label: i for i, label in enumerate(dict.fromkeys(labels.tolist()))}
    labels = np.array([order[v] for v in labels], dtype=np.int64)
    return labels, indicator(labels, k)


def indicator(labels: np.ndarray, k: int) -> np.ndarray:
    """F with F_ic = 1/sqrt(n_c) if client i is in cluster c (so F^T F = I)."""
    f = np.zeros((len(labels), k))
    for c in range(k):
        members = labels == c
        if members.any():
            f[members, c] = 1.0 / np.sqrt(members.sum())
    return f


def _flat(weights: list[np.ndarray]) -> np.ndarray:
    return np.concatenate([w.ravel() for w in weights])


def _unflat(vector: np.ndarray, like: list[np.ndarray]) -> list[np.ndarray]:
    out, i = [], 0
    for w in like:
        out.append(vector[i : i + w.size].reshape(w.shape).astype(np.float32))
        i += w.size
    return out


@dataclasses.dataclass
class ClusterFLState:
    """W, U, Omega (rows: clients in data order), the cluster labels, and the accounts."""

    w: np.ndarray
    u: np.ndarray
    omega: np.ndarray
    labels: np.ndarray
    accounts: CommAccounts

    def to_checkpoint(self) -> tuple[dict, dict]:
        arrays = {
            "w": [self.w],
            "u": [self.u.astype(np.float32)],
            "omega": [self.omega.astype(np.float32)],
            "labels": [self.labels],
        }
        return arrays, self.accounts.scalars()

    @classmethod
    def from_checkpoint(cls, arrays: dict, accounts: CommAccounts) -> ClusterFLState:
        w, u, omega, labels = (arrays[k][0] for k in ("w", "u", "omega", "labels"))
        return cls(w, u, omega, labels, accounts)

    @staticmethod
    def schema(clients: int, params: int, clusters: int) -> Schema:
        """What a checkpoint of this state holds for ``clients`` clients, a model of
        ``params`` weights and ``clusters`` clusters: W, U and Omega of (clients, params), and
        one cluster below ``clusters`` per client."""
        return Schema(
            {**{k: [(clients, params)] for k in ("w", "u", "omega")}, "labels": [(clients,)]},
            {"labels": clusters},
        )


class ClusterFLRounds(Algorithm[ClusterFLState]):
    """ClusterFL's rounds on the shared loop: the local, Omega, cluster and dual steps (the
    module's 1-4)."""

    def __init__(self, config: ClusterFLConfig, data: FederatedData, spec: ModelSpec):
        self.config = config
        self.init = [np.asarray(w) for w in spec.initial_weights().trainable]
        self.ids = [c.client_id for c in data.clients]
        self.by_id = {c.client_id: c for c in data.clients}
        self.row_of = {cid: i for i, cid in enumerate(self.ids)}
        self.n_params = int(sum(w.size for w in self.init))
        self.process = build_learning_process(
            spec, LocalTraining(config.local_epochs, config.learning_rate, prox=config.rho)
        )
        self.base = self.process.initialize()

    def accounts(self, saved: dict | None = None) -> CommAccounts:
        n = self.n_params
        return CommAccounts(n, n, n, saved)  # dense: nothing prunable

    def describe(self, t: int) -> str:
        return f"clusterfl {dataset_label(self.config.dataset)}"

    def initial(self) -> ClusterFLState:
        w = np.tile(_flat(self.init), (len(self.ids), 1))
        labels = np.zeros(len(self.ids), np.int64)
        return ClusterFLState(w, np.zeros_like(w), w.copy(), labels, self.accounts())

    def schema(self, arrays: dict) -> Schema:
        return ClusterFLState.schema(len(self.ids), self.n_params, self.config.clusters)

    def restore(self, rounds_done: int, arrays: dict, scalars: dict) -> ClusterFLState:
        return ClusterFLState.from_checkpoint(arrays, self.accounts(scalars))

    def step(self, r: int, state: ClusterFLState) -> Step[ClusterFLState]:
        """One round: local steps of the sampled clients, then the Omega, cluster and dual
        steps (the module's 1-4)."""
        config, process, init, row_of = self.config, self.process, self.init, self.row_of
        chosen = sample_clients(self.ids, config.clients_per_round, config.seed, r)
        w, u, omega = state.w, state.u, state.omega
        f = indicator(state.labels, config.clusters)
        jobs = []
        for cid in chosen:
            i = row_of[cid]
            start = process.set_model_weights(
                self.base, tff.learning.models.ModelWeights(_unflat(w[i], init), [])
            )
            start = with_client_work_state(start, anchor=_unflat(omega[i] - u[i], init))
            jobs.append((process, start, [self.by_id[cid]]))
        outputs = run_rounds_concurrently(jobs, r, config.seed, config.batch_size)
        losses = []
        for cid, output in zip(chosen, outputs):
            trained = process.get_model_weights(output.state).trainable
            w[row_of[cid]] = _flat([np.asarray(t) for t in trained])
            losses.append(float(output.metrics["client_work"]["train"]["train_loss"]))
        state.accounts.model(self.n_params, 2 * len(chosen))
        omega = omega_step(w, u, f, config.rho, config.alpha, config.beta).astype(np.float32)
        labels, f = cluster_step(omega, config.clusters, config.seed)
        u = (u + w - omega).astype(np.float32)
        row = {
            "round": r,
            "clients": len(chosen),
            "train_loss": float(np.mean(losses)),
            "cluster_sizes": "/".join(
                str(int(np.sum(labels == c))) for c in range(config.clusters)
            ),
            "primal_residual": float(np.linalg.norm(w - omega)),
            "comm_mb_eq13": state.accounts.total_mb("eq13"),
        }
        return Step(ClusterFLState(w, u, omega, labels, state.accounts), [row])


class ClusterFLRun(PersonalRun[ClusterFLConfig], family=ClusterFLConfig):
    """A ClusterFL run for the composer (:mod:`fedprune.engine.compose`): the HAR run's data,
    checks (clusters and clients per round) and model; the rounds; then the clusters, every
    client's fine-tuning from its own w_i (:meth:`~.personal.PersonalRun.personalize`), and
    the summary."""

    at_most_clients = ("clusters", "clients_per_round")

    def start(self, run: RunDir) -> tuple[ClusterFLRounds, int]:
        self.rounds = ClusterFLRounds(self.config, self.data, self.spec)
        return self.rounds, self.config.rounds

    def summary(self, run: RunDir, result: RoundsResult[ClusterFLState]) -> dict:
        config, state, ids = self.config, result.state, self.rounds.ids
        write_clustering(run, {cid: int(state.labels[r]) for r, cid in enumerate(ids)})
        personal = self.personalize(run, *personal_starts(state.w, ids, self.spec), pruned=False)
        return {
            **self.har_summary(result, self.rounds.n_params),  # wall_s: with the fine-tuning
            "rounds": config.rounds,
            "clusters": {str(c): int(np.sum(state.labels == c)) for c in range(config.clusters)},
            **state.accounts.summary(),
            **personal,
        }


run_clusterfl = ClusterFLRun.run
"""Train (or resume, or return the finished) ClusterFL run of ``config`` in ``out``
(``run_clusterfl(config, out, data_dir=None, progress=True, model=None)``). ``model``: your
own model (:mod:`fedprune.models.user`), as ``config.model`` names it."""


def personal_starts(
    w: np.ndarray, ids: list[int], spec: ModelSpec
) -> tuple[dict[int, list[np.ndarray]], dict[int, list[np.ndarray]]]:
    """Fine-tuning's inputs: client ``ids[r]`` starts from its own model, row r of W, with
    all-ones kernel masks (ClusterFL is dense). Returns ({client: weights}, {client: masks})."""
    init = [np.asarray(v) for v in spec.initial_weights().trainable]
    ones = select([np.ones_like(k) for k in init], kernel_flags(spec))
    return {cid: _unflat(w[r], init) for r, cid in enumerate(ids)}, {cid: ones for cid in ids}


def finetune_start(
    run: FinishedRun, data: FederatedData, spec: ModelSpec
) -> tuple[dict[int, list[np.ndarray]], dict[int, list[np.ndarray]]]:
    """Fine-tuning's inputs of the finished ClusterFL run ``run`` (``fedprune finetune``):
    the final W of its ``checkpoint.npz`` (rows: clients in data order)."""
    arrays = artefacts.read_checkpoint_arrays(run.path)
    ids = [c.client_id for c in data.clients]
    n = sum(int(np.prod(v.shape)) for v in spec.initial_weights().trainable)
    w = arrays.get("w", [None])[0]
    if w is None or w.shape != (len(ids), n):
        found = "no W" if w is None else f"W of shape {w.shape}"
        raise damaged(
            run.path / names.CHECKPOINT,
            ValueError(f"{found}, expected ({len(ids)}, {n}) for {len(ids)} clients"),
        )
    return personal_starts(w, ids, spec)
