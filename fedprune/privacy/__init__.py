"""Differential privacy shared by the methods: TFF's DP aggregator as a clipped, noised mean
(:mod:`.dp_mean`), the (ε, δ) accountant (:mod:`.accounting`) and a client's noised upload
(:mod:`.local`)."""
