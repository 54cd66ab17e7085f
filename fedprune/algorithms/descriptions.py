"""One-line and long descriptions of the pipeline methods, for ``fedprune train --help``.

Kept apart from the algorithm modules so that the command line can describe them without
importing TensorFlow.
"""

_FILES = (
    "config.json, metrics.csv (per round and cluster), clusters.json, masks.npz, "
    "cluster_models.npz, personal_ft<E>.npz and summary.json in --out; resumable like every run."
)

DESCRIPTIONS = {
    "caafp": (
        "CA-AFP: clustering, prune-and-heal, sparse fine-tuning",
        "Cluster-Aware Adaptive Federated Pruning (Algorithm 1 of the paper) on TFF. " + _FILES,
    ),
    "global_ft": (
        "CA-AFP with one cluster (the paper's Global-FT)",
        "CA-AFP with K = 1: prune-and-heal on one global model, then fine-tuning. " + _FILES,
    ),
    "fedchar": (
        "FedCHAR baseline (dense, clustered, personalized)",
        "10 FedAvg warm-up rounds, cosine clustering into 3 groups, 40 rounds of per-group "
        "training with a proximal term, fine-tuning; no pruning. " + _FILES,
    ),
    "efficientfl": (
        "EfficientFL baseline (one early magnitude mask, 70 %%)",
        "Magnitude pruning to 70 % after the first round, fixed mask afterwards, K = 1, "
        "fine-tuning. " + _FILES,
    ),
    "fedsnip": (
        "FedSNIP baseline (one-shot SNIP mask, 70 %%)",
        "SNIP connection sensitivity |E[g] * w0| from the clients' mean gradient at the "
        "initial weights, one fixed 70 % mask, K = 1, fine-tuning. " + _FILES,
    ),
}
