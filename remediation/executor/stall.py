"""An executing action that moves no bytes for the stall time is reported stalled.

A copy can stop without failing: its only source gone with no leader left, a throttle an
operator lowered to nothing, a broker that no longer fetches. Nothing ends such an action
but the execution timeout (an hour), so it is named as soon as it stops: the audit says
`stalled` once (and `moving again` if it does), the journal's `stalled` feeds the
`selfheal_actions_stalled` gauge and the remediation dashboard. An action whose *targets*
are gone is not left stalled: it ends at once (`targets.py`) and frees its partitions.

Bytes moved are read off the same DescribeLogDirs answers as everything else: the size
of each replica a reassignment in flight is adding, and of each future replica a dir move
is filling.
"""

from __future__ import annotations

from datetime import datetime

from core import clock
from core.plan.formats import human_bytes
from remediation.executor.store import ActionRow, ActionStore
from remediation.executor.throttling import ACTOR
from remediation.executor.view import LiveView
from schemas.records import Action


def copied(action: Action, view: LiveView) -> int:
    """Bytes the action's copies in flight hold so far."""
    total = 0
    for t in action.targets():
        r = view.reassigning.get((t.topic, t.partition))
        p = view.partition(t.topic, t.partition)
        if r is not None and p is not None:
            total += sum(rep.size_bytes for rep in p.replicas if rep.broker in r.adding)
        total += sum(view.future_bytes.get((t.topic, t.partition, b), 0) for b in t.replicas)
    return total


def watch(store: ActionStore, row: ActionRow, now: datetime, moved: int,
          stall_seconds: float) -> None:
    """Note progress (any change in the bytes copied), and say `stalled` once when there
    has been none for `stall_seconds`."""
    last = row.journal.get("copied")
    stalled = row.journal.get("stalled")
    if last is None or moved != last["bytes"]:
        store.update_journal(row.id, copied={"bytes": moved, "at": clock.text(now)},
                             stalled=None)
        if stalled:
            store.note(row.id, ACTOR, f"moving again ({human_bytes(moved)} copied so far)")
        return
    idle = (now - clock.parse(last["at"])).total_seconds()
    if idle >= stall_seconds and not stalled:
        store.update_journal(row.id, stalled={"since": last["at"], "bytes": moved})
        store.note(row.id, ACTOR, f"stalled: no bytes moved for {idle:.0f} s (stall time "
                   f"{stall_seconds:g} s; {human_bytes(moved)} copied so far); its targets "
                   "are alive, so it waits for its source or its throttle")
