"""CA-AFP (Jha, Shukla, Lone 2026): the pieces of Cluster-Aware Adaptive Federated Pruning.

* :mod:`~fedprune.algorithms.caafp.prune_and_heal`: the mask policy (Algorithm 1 lines 36-59)
  that makes CA-AFP a policy on the shared pipeline (:mod:`fedprune.algorithms.pipeline`);
* :mod:`~fedprune.algorithms.caafp.clustering`: the cosine clustering of Phase 2's start;
* :mod:`~fedprune.algorithms.caafp.communication`: the communication accounts (Eq. 13);
* :mod:`~fedprune.algorithms.caafp.finetune`: Phase 4, masked personal fine-tuning (Eq. 12).

Its baselines (FedCHAR, EfficientFL, FedSNIP, Global-FT, ClusterFL) are other policies on the
same pipeline, in :mod:`fedprune.algorithms`.
"""
