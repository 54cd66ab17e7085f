"""``python -m fedprune``: the same command as ``fedprune`` (:func:`fedprune.cli.run`), for
environments where the console script is not on ``PATH``."""

from fedprune.cli import run

run()
