"""The interpreter command line of every Python child process fedprune starts.

``python -m module`` (and ``python script.py``) puts the current folder (the script's folder)
first on ``sys.path``, so a file such as ``argparse.py`` planted in the folder a command is run
from, by anyone who can write it (a shared project or scratch folder), would be imported by
the child with the user's rights. ``-P`` (Python 3.11) leaves that entry out and changes
nothing else: ``PYTHONPATH`` (a frozen checkout, the sandbox's package root) and the
installed packages (an editable install's path hook) still import. ``-I`` would also drop
``PYTHONPATH`` and the user's site-packages; the plain worker's wrapper uses it, since it
imports nothing of fedprune.
"""

from __future__ import annotations

import sys

PYTHON = (sys.executable, "-P")
"""``python -P``: this interpreter, with nothing imported from the current folder."""
