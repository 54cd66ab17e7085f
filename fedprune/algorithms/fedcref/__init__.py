"""FedCRef (Nardi, Valerio, Passarella): unsupervised federated clustering with per-cluster
autoencoders, association by reconstruction error, communities and refinement."""

from fedprune.algorithms.fedcref.algorithm import FedCRef, FedCRefState, IterationReport

__all__ = ["FedCRef", "FedCRefState", "IterationReport"]
