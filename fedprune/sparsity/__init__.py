"""Sparsity pieces of CA-AFP: which tensors are prunable, the prune-and-heal schedule, the
importance scores and the mask updates, each a pure function on numpy arrays."""
