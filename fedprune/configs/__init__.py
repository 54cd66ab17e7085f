"""The configurations of every method: frozen dataclasses, importable without TensorFlow.

* :mod:`~fedprune.configs.fields`: :func:`param`, a dataclass field with its help text,
  command-line option name, :class:`~fedprune.checks.Rule` and parser; :class:`Config`, the
  base whose ``__post_init__`` runs every field's rule;
* :mod:`~fedprune.configs.har`: the fields every HAR method shares (dataset, clients per
  round, local epochs, batch size, learning rate, seed, standardize, fine-tuning epochs);
* :mod:`~fedprune.configs.fedavg`, :mod:`~fedprune.configs.pipeline` (CA-AFP, Global-FT,
  FedCHAR, EfficientFL, FedSNIP), :mod:`~fedprune.configs.clusterfl`,
  :mod:`~fedprune.configs.fedcref`: one module per method family;
* :mod:`~fedprune.configs.command_line`: ``fedprune train <method>``'s options, generated
  from the fields.

``dataclasses.asdict(config)`` is what ``config.json`` records; a run resumes only with the
same dict, so field names and defaults are part of the run-directory format.
"""
