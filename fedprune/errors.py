"""Errors the command line turns into one clear line (no stack trace)."""


class FedpruneError(Exception):
    """Base class: a problem the user can fix; the message says how."""


class DataError(FedpruneError):
    """Missing, corrupt or malformed data files."""


class ConfigError(FedpruneError, ValueError):
    """Impossible or inconsistent parameters."""
