"""The snapshot collector's trigger window: a burst of triggers (events, probe findings)
becomes one snapshot, due ``[collect] event_coalesce_seconds`` after the first, about the
brokers they named (or the whole cluster once one names none)."""

from __future__ import annotations

from collections.abc import Iterable


class Coalescer:
    """Turns a burst of triggers into one: due ``window`` seconds after the first."""

    def __init__(self, window: float) -> None:
        self.window = window
        self.due_at: float | None = None
        self.reasons: list[str] = []
        # The brokers the gathered triggers are about; None once one names none.
        self.brokers: set[int] | None = set()

    def note(self, now: float, reason: str, wait: bool = True,
             brokers: Iterable[int] | None = None) -> None:
        """One trigger at ``now`` about ``brokers`` (None: about the whole cluster);
        ``wait=False`` makes the next one due at once."""
        due = now + self.window if wait else now
        self.due_at = due if self.due_at is None else min(self.due_at, due)
        self.reasons.append(reason)
        if brokers is None or self.brokers is None:
            self.brokers = None
        else:
            self.brokers.update(brokers)

    def about(self) -> set[int] | None:
        """The brokers the triggers gathered so far are about, or None for all; read it
        before `take`."""
        return None if self.brokers is None else set(self.brokers)

    def due(self, now: float) -> bool:
        return self.due_at is not None and now >= self.due_at

    def take(self) -> str:
        """The reasons gathered since the last take, summed up; resets."""
        reasons, self.reasons, self.due_at = self.reasons, [], None
        self.brokers = set()
        if len(reasons) <= 2:
            return ", ".join(reasons)
        return f"{reasons[0]} and {len(reasons) - 1} more"
