"""The one error the planners raise."""

from __future__ import annotations


class PlanError(ValueError):
    """The inputs cannot make a plan (bad arguments, not a bad cluster): fix and rerun."""
