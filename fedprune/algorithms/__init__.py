"""Algorithms, each a module composing the engine's pieces; ``registry.ALGORITHMS`` names them.

Kept import-free so that ``fedprune --help`` does not load TensorFlow.
"""
