"""Names resolved on first use, so that registries stay free of heavy imports."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def resolve(path: str) -> Callable:
    """The function named by ``"package.module:function"`` (imports the module now)."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)
