"""Strategies chosen by configuration class: one table per kind of strategy (a run family, a
mask policy, a clusterer), keyed by the configuration classes they serve.

A configuration says *what* it is by its class; the module that implements a strategy
registers it against that class (:meth:`ByConfig.register`), so the configurations name no
module above them and import nothing heavy. A configuration's strategy is the one registered
for the most specific class of its method resolution order (:meth:`ByConfig.of`), so a
subclass that only changes defaults runs with its parent's strategy, and one that registers
its own runs with that.

A configuration class may also name its strategy by ``"module:function"`` in the table's
``attribute`` (e.g. ``POLICY``; ``None``: none), set in its own class body: the table imports
that module when the strategy is first asked for. This is how a method defined outside fedprune can
still be written (``tests/examples/random_mask.py``); fedprune's own configurations register.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from fedprune.lazy import resolve

T = TypeVar("T")


class ByConfig(Generic[T]):
    """A table of strategies of one ``kind`` (its name in errors), by configuration class;
    ``attribute``: the class attribute that may name one by ``"module:function"``."""

    def __init__(self, kind: str, attribute: str | None = None):
        self.kind = kind
        self.attribute = attribute
        self._table: dict[type, T] = {}

    def register(self, config_class: type, strategy: T) -> None:
        """``strategy`` serves ``config_class`` and its subclasses (unless they register
        their own)."""
        self._table[config_class] = strategy

    def registered(self) -> dict[type, T]:
        """Every registered class and its strategy, in the order registered."""
        return dict(self._table)

    def of(self, config: object) -> T:
        """The strategy of ``config``: the one registered for the first class of its MRO
        that has one (registered, or named in its own ``attribute``); ``LookupError`` if
        none, naming the configuration's class."""
        for cls in type(config).__mro__:
            if cls in self._table:
                return self._table[cls]
            if self.attribute and self.attribute in vars(cls):
                named = vars(cls)[self.attribute]
                return None if named is None else resolve(named)
        raise LookupError(
            f"no {self.kind} is registered for {type(config).__name__}; the module that "
            f"implements it registers it when it is imported"
        )
