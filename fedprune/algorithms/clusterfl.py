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

Interpretations (the ClusterFL paper is not in ``shared/papers``; this follows its published
formulation as summarized above): clients are sampled 10 per round as for every method, and
the server steps use the latest W and U of all clients; the models start from the common
initialization with Omega = W and U = 0, and the first Omega step treats all clients as one
cluster (F from the first cluster step on); the deployed personal model of a client is its
w_i, fine-tuned like every method's (3 and 25 epochs). Every round each sampled client
downloads Omega_i - U_i and uploads w_i, both dense (Eq. 13). The straggler-dropout and
node-selection parts of ClusterFL (for slow devices) are not simulated.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import tensorflow_federated as tff
from sklearn.cluster import KMeans
from tqdm import tqdm

from fedprune.checks import (
    check_at_most,
    check_count,
    check_nonnegative,
    check_positive,
    check_seed,
)
from fedprune.communication import CommAccounts
from fedprune.data.registry import load_federated
from fedprune.engine.client_work import LocalTraining
from fedprune.engine.process import ModelSpec, build_learning_process, with_client_work_state
from fedprune.engine.rounds import run_rounds_concurrently, sample_clients
from fedprune.errors import ConfigError
from fedprune.finetune import finetune_and_evaluate
from fedprune.runs import RunDir


@dataclasses.dataclass(frozen=True)
class ClusterFLConfig:
    """Hyper-parameters; defaults from the CA-AFP paper's Tables 5-6."""

    dataset: str
    rounds: int = 50
    clusters: int = 3
    rho: float = 5e-3
    alpha: float = 1e-3
    beta: float = 5e-4
    clients_per_round: int = 10
    local_epochs: int = 3
    batch_size: int = 32
    learning_rate: float = 1e-3
    ft_epochs: tuple[int, ...] = (3, 25)
    seed: int = 0
    standardize: bool = False
    method: str = "clusterfl"

    def resolved(self) -> ClusterFLConfig:
        for name in ("rounds", "clusters", "clients_per_round", "local_epochs", "batch_size"):
            check_count(name, getattr(self, name))
        check_positive("lr", self.learning_rate)
        check_positive("rho", self.rho)
        check_nonnegative("alpha", self.alpha)
        check_nonnegative("beta", self.beta)
        if not self.ft_epochs:
            raise ConfigError("--ft-epochs needs at least one value")
        for e in self.ft_epochs:
            check_count("ft_epochs", e, minimum=0)
        check_seed(self.seed)
        if 2 * self.alpha + self.rho - 2 * self.beta <= 0:
            raise ConfigError("2 alpha + rho - 2 beta must be > 0 for the Omega step")
        return self


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


def run_clusterfl(
    config: ClusterFLConfig,
    out: str | Path,
    data_dir: str | Path | None = None,
    progress: bool = True,
) -> dict:
    """Train (or resume, or return the finished) ClusterFL run in ``out``."""
    config = config.resolved()
    run = RunDir(out, dataclasses.asdict(config))
    if run.finished:
        return run.read_summary()
    data = load_federated(config.dataset, config.seed, data_dir, config.standardize)
    check_at_most("clusters", config.clusters, data.num_clients, f"{config.dataset}'s clients")
    spec = ModelSpec(data.input_shape, data.num_classes, config.seed)
    init = [np.asarray(w) for w in spec.initial_weights().trainable]
    ids = [c.client_id for c in data.clients]
    by_id = {c.client_id: c for c in data.clients}
    n_params = int(sum(w.size for w in init))
    accounts = CommAccounts(n_params, n_params, n_params)

    w = np.tile(_flat(init), (len(ids), 1))
    u = np.zeros_like(w)
    omega = w.copy()
    labels = np.zeros(len(ids), dtype=np.int64)
    done, wall_before = 0, 0.0
    checkpoint = run.load_checkpoint()
    if checkpoint is not None:
        done, arrays, scalars = checkpoint
        w, u, omega, labels = (arrays[k][0] for k in ("w", "u", "omega", "labels"))
        wall_before = scalars["wall_s"]
        accounts = CommAccounts(n_params, n_params, n_params, scalars)
    run.truncate_metrics(done)
    f = indicator(labels, config.clusters)
    start = time.perf_counter()

    process = build_learning_process(
        spec, LocalTraining(config.local_epochs, config.learning_rate, prox=config.rho)
    )
    base = process.initialize()
    row_of = {cid: i for i, cid in enumerate(ids)}
    bar = tqdm(
        range(done + 1, config.rounds + 1),
        initial=done,
        total=config.rounds,
        desc=f"clusterfl {config.dataset}",
        unit="round",
        disable=not progress,
    )
    for r in bar:
        chosen = sample_clients(ids, config.clients_per_round, config.seed, r)
        jobs = []
        for cid in chosen:
            i = row_of[cid]
            state = process.set_model_weights(
                base, tff.learning.models.ModelWeights(_unflat(w[i], init), [])
            )
            state = with_client_work_state(state, anchor=_unflat(omega[i] - u[i], init))
            jobs.append((process, state, [by_id[cid]]))
        outputs = run_rounds_concurrently(jobs, r, config.seed, config.batch_size)
        losses = []
        for cid, output in zip(chosen, outputs):
            trained = process.get_model_weights(output.state).trainable
            w[row_of[cid]] = _flat([np.asarray(t) for t in trained])
            losses.append(float(output.metrics["client_work"]["train"]["train_loss"]))
        accounts.model(n_params, 2 * len(chosen))
        omega = omega_step(w, u, f, config.rho, config.alpha, config.beta).astype(np.float32)
        labels, f = cluster_step(omega, config.clusters, config.seed)
        u = (u + w - omega).astype(np.float32)
        run.append_metrics(
            {
                "round": r,
                "clients": len(chosen),
                "train_loss": float(np.mean(losses)),
                "cluster_sizes": "/".join(
                    str(int(np.sum(labels == c))) for c in range(config.clusters)
                ),
                "primal_residual": float(np.linalg.norm(w - omega)),
                "comm_mb_eq13": accounts.total_mb("eq13"),
            }
        )
        run.save_checkpoint(
            r,
            {
                "w": [w],
                "u": [u.astype(np.float32)],
                "omega": [omega.astype(np.float32)],
                "labels": [labels],
            },
            {"wall_s": wall_before + time.perf_counter() - start, **accounts.scalars()},
        )
    bar.close()

    (run.path / "clusters.json").write_text(
        json.dumps({str(cid): int(labels[row_of[cid]]) for cid in ids}, indent=2) + "\n"
    )
    ones = [np.ones_like(k) for k in init if k.ndim > 1]
    finetune, sparsity = finetune_and_evaluate(
        run.path,
        data,
        {cid: _unflat(w[row_of[cid]], init) for cid in ids},
        {cid: ones for cid in ids},
        config,
        progress,
    )
    summary = {
        "method": config.method,
        "dataset": config.dataset,
        "seed": config.seed,
        "rounds": config.rounds,
        "num_clients": data.num_clients,
        "params": n_params,
        "clusters": {str(c): int(np.sum(labels == c)) for c in range(config.clusters)},
        "sparsity": sparsity,
        "comm_mb_eq13": accounts.total_mb("eq13"),
        "comm_mb_payload": accounts.total_mb("payload"),
        "comm_mb_eq13_by_kind": {c: v / 1e6 for c, v in accounts.eq13.items()},
        "wall_s": wall_before + time.perf_counter() - start,
        "finetune": finetune,
    }
    run.write_summary(summary)
    return summary
