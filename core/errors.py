"""The error every command can raise for a problem the user can fix.

Component errors (`ConfigError`, `BusError`, `ClusterError`, ...) live next to the code
that raises them; a command turns them into a `CliError`, which the root CLI prints
without a traceback and exits with ``code``.
"""

from __future__ import annotations


class CliError(Exception):
    """An error the user can fix; printed without a traceback, exit status ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code
