"""Global-FT: CA-AFP with a single cluster (K = 1), as in the CA-AFP paper's Figures 3-4.

Everything else is CA-AFP's: prune-and-heal from the federated importance scores, then
per-client masked fine-tuning of the one global sparse model.
"""

from __future__ import annotations

from fedprune.algorithms.caafp.prune_and_heal import run_caafp as run_global_ft

__all__ = ["run_global_ft"]
