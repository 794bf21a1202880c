"""A failure's delta in the detector (schemas/snapshot_delta.py says what a delta is).

A delta is the failure's own evidence, taken after it: its offline dirs open episodes and
its online ones end them, as a snapshot's would for those brokers. Taken after the
latest full snapshot, it is also what the fix is planned from (the snapshot + the delta,
streams/propose.py), so the fix does not wait for the next full snapshot. Three cases:

- older than (or as old as) the latest full snapshot: ignored, the snapshot says more;
- no full snapshot yet (the delta came first): used as evidence only, and the fix waits
  for a full snapshot as it would without the delta;
- naming a broker the latest full snapshot does not list: a dead letter saying so (the
  model cannot place that broker's dirs or racks; the next full snapshot brings it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streams.detect_types import SNAPSHOT, DeltaSeen, Note

if TYPE_CHECKING:
    from streams.detect import _Step


def see_delta(run: _Step, seen: DeltaSeen) -> None:
    """Apply one delta to the step's state."""
    state = run.state
    base = state.snapshot
    if base is not None:
        if seen.time <= base.taken_at:
            return  # stale
        unknown = sorted(b for b in seen.brokers if b not in state.brokers)
        if unknown:
            run.notes.append(Note(
                run.cluster_id, seen.time,
                f"$: a snapshot delta names broker(s) {', '.join(map(str, unknown))}, which "
                f"the latest full snapshot of cluster {run.cluster_id} (taken at epoch ms "
                f"{base.taken_at}) does not list; the next full snapshot brings them",
                letter=(seen.ref, seen.body)))
            return
        if state.delta is None or seen.time > state.delta.taken_at:
            state.delta = seen.ref
    for broker, (alive, dirs) in sorted(seen.brokers.items()):
        if not alive:
            continue  # a dead broker's dirs are last known, not current
        for log_dir, online in sorted(dirs.items()):
            episode = state.episodes.get((broker, log_dir))
            if not online:
                run.offline(broker, log_dir, seen.time, SNAPSHOT)
            elif episode is not None and seen.time > episode.evidence:
                run.end(episode)
                # back from its failure, as a snapshot's online dir would say: held as
                # returned, so the next snapshot cordons it (the snapshot finds no
                # episode left to end and would not say so itself)
                run.came_back(broker, log_dir, seen.time)
