"""Detection's log-dir cordon rules (a part of streams/detect.py's `_Step`; KIP-1066,
metadata.version 4.3-IV0+).

A dir that failed and came back online (`returned`, held for `returned_trust_ms` of
being online) and a dir past the skew limit on a broker whose disk-move fix is proposed
are cordoned, one `cordon_log_dir` each, so no new replica lands there while the moves
run. Ours are the dirs this detector proposed a cordon for while the dir was open (an
operator's cordon is never ours); once such a dir is cordoned, online, no longer
returned and within the limit again, one `uncordon_log_dir` is proposed; while the dir
stays cordoned and healthy (the uncordon expired, failed or was rejected), it is proposed
again after `uncordon_retry_ms`, doubling each time up to `uncordon_retry_max_ms`.
Serve re-opens an expired or failed one (same id); an operator's rejection (cancelled)
stays, and serve notes each later proposal as not re-opened. The planner
(core/plan/cordon.py) checks each against the snapshot: never a broker's last open dir.
A cluster too old to cordon gets one note (when a dir would be cordoned) and nothing
else.
"""

from __future__ import annotations

from core.plan.cordon import unsupported
from streams.detect_types import (
    CORDON_DIR,
    SNAPSHOT,
    UNCORDON_DIR,
    ClusterState,
    Decision,
    DetectSettings,
    Ms,
    Note,
    SnapshotSeen,
)


class CordonRules:
    """The cordon rules, mixed into detection's `_Step`."""

    settings: DetectSettings
    cluster_id: str
    state: ClusterState
    decisions: list[Decision]
    notes: list[Note]

    def came_back(self, broker: int, log_dir: str, time: Ms) -> None:
        """The dir of an offline episode is online again: held as returned."""
        self.state.returned[(broker, log_dir)] = time

    def cordoned_now(self) -> tuple[tuple[int, str], ...]:
        """The dirs this detector cordoned (not lifted) or will cordon (returned): a fix
        planned now must not name them, whatever an older snapshot says (unless it is its
        broker's last open dir, which the cordon planner refuses: streams/propose.py)."""
        state = self.state
        return tuple(sorted({k for k, lifted in state.cordons.items() if not lifted}
                            | set(state.returned)))

    def cordons(self, seen: SnapshotSeen) -> None:
        state, facts = self.state, seen.facts
        trust = self.settings.returned_trust_ms
        for key, since in list(state.returned.items()):
            if seen.time <= since or (key[0] in facts.dirs and not facts.alive.get(key[0])):
                continue  # taken before it came back, or a down broker's last known dirs
            online = facts.dirs.get(key[0], {}).get(key[1])
            if not online or seen.time - since >= trust:
                del state.returned[key]  # gone, failed again (a new episode), or trusted
        wanted = [(b, p, f"log dir {p} on broker {b} failed and is back online: cordoned "
                   "so no new replica lands there until it is trusted again")
                  for b, p in sorted(state.returned) if facts.dirs.get(b, {}).get(p)]
        for broker, ratio in sorted(facts.skewed.items()):
            spell = state.skew.get(broker)
            if spell is None or not spell.proposed:
                continue  # cordoned together with the disk-move fix, not before
            wanted += [(broker, p, f"log dir {p} on broker {broker} is past the skew limit "
                        f"(fullest dir {ratio:.2f}x its broker's mean): cordoned so no new "
                        "replica lands there while the moves out of it run")
                       for p in facts.over.get(broker, ())]
        why_not = unsupported(facts.metadata_level)
        if why_not is not None:
            # Said once, when there is a dir to cordon; nothing is proposed.
            if wanted and not state.cordon_note:
                state.cordon_note = True
                self.notes.append(Note(self.cluster_id, seen.time, why_not))
            return
        state.cordon_note = False
        for broker, path, reason in wanted:
            self.cordon(seen, broker, path, reason)
        self.lift(seen)

    def cordon(self, seen: SnapshotSeen, broker: int, path: str, reason: str) -> None:
        key, facts = (broker, path), seen.facts
        if key in self.state.cordons or path in facts.cordoned.get(broker, ()):
            return  # proposed already, or cordoned by someone else (theirs)
        if not facts.alive.get(broker, False):
            return
        self.state.cordons[key] = False
        self.decisions.append(Decision(CORDON_DIR, self.cluster_id, seen.time, SNAPSHOT,
                                       broker, path, seen.ref, (), reason))

    def lift(self, seen: SnapshotSeen) -> None:
        state, facts = self.state, seen.facts
        for key, lifted in sorted(state.cordons.items()):
            broker, path = key
            online = facts.dirs.get(broker, {}).get(path)
            if online is None:
                del state.cordons[key]  # the dir or its broker left
                state.lifts.pop(key, None)
                continue
            healthy = (online and key not in state.returned
                       and path not in facts.over.get(broker, ()))
            cordoned = path in facts.cordoned.get(broker, ())
            if not healthy or not facts.alive.get(broker, False):
                continue
            if not cordoned:
                del state.cordons[key]  # lifted, or never approved: nothing of ours left
                state.lifts.pop(key, None)
                continue
            at, tries = state.lifts.get(key, (seen.time, 1) if lifted else (0, 0))
            if tries and seen.time - at < self.settings.uncordon_wait(tries):
                state.lifts[key] = (at, tries)
                continue  # proposed, and not yet long enough ago to ask again
            state.cordons[key] = True
            state.lifts[key] = (seen.time, tries + 1)
            again = f" (proposed {tries} time(s) before, not done)" if tries else ""
            self.decisions.append(Decision(
                UNCORDON_DIR, self.cluster_id, seen.time, SNAPSHOT, broker, path,
                seen.ref, (), f"log dir {path} on broker {broker} is online and within "
                f"the skew limit again{again}"))
