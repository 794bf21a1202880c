"""Decisions in, action records out: the planners run here, on the driver.

The detector keeps no snapshot in its state, only where the latest one sits on the bus;
a decision brings that reference, the failure's delta when one came after it, and the
dirs the detector holds offline. The snapshot is the one the driver keeps decoded
(streams/keeper.py decodes each new one off the batch's path: the compiled core's
columns, the same model `selfheal plan` reads; records without the core), the delta is
applied to it in memory (schemas/snapshot_delta.py), the held dirs are marked
offline in it (the snapshot may predate the failure: the gauge can beat the collector),
and the planner for the decision's type runs on the whole cluster model. Where the
result does not hold together, the document path (the snapshot's dict + the delta's,
through the snapshot's reader) says what is wrong. Each action
names only what its trigger is about: the partitions with a replica on the failed dir,
the moves on the skewed broker. Same snapshot, same decision: same plan, same action id.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import msgspec

from core import clock
from core.model import ClusterModel
from core.plan.disks import broker_usage, mean_ratio
from core.plan.errors import PlanError
from core.plan.formats import (
    ANY_DIR,
    DiskPlan,
    OfflinePlan,
    PartitionAssignment,
    Reassignment,
    human_bytes,
)
from schemas.actions import build_action
from schemas.records import Action, Receiving, Trigger
from schemas.registry import RecordError
from schemas.snapshot import SnapshotError, snapshot_from_dict
from schemas.snapshot_delta import apply_delta, check_delta, snapshot_with_delta
from schemas.snapshot_types import Broker, LogDir, Snapshot
from streams.detect_types import (
    ASSIGN_CONSUMERS,
    CORDON_DIR,
    DEAD_BROKER,
    FIX_OFFLINE,
    MOVE_DIRS,
    PAGE,
    REBALANCE_LEADERS,
    UNCORDON_DIR,
    Decision,
    SnapshotRef,
)
from streams.keeper import ReadSnapshot, SnapshotKeeper


def _ours_to_mark(dirs: list[tuple[str, bool, bool]], path: str) -> bool:
    """Whether a dir the detector holds cordoned (or about to be) is one on its broker
    (``dirs``: path, online, cordoned): online, and not the broker's last open dir, which
    the cordon planner never takes (an operator's cordon may have the others), so a fix
    may still place replicas there."""
    return any(p == path and online for p, online, _ in dirs) and any(
        online and not cordoned and p != path for p, online, cordoned in dirs)


def mark_cordoned(doc: dict[str, Any], dirs: Iterable[tuple[int, str]]) -> None:
    """Mark ``dirs`` cordoned in a snapshot document (a dir it does not list, lists
    offline, or that is its broker's last open dir is left as it is); changed brokers
    are copied first, as in `mark_offline`."""
    index = {b["id"]: i for i, b in enumerate(doc["brokers"])}
    for broker, path in dirs:
        i = index.get(broker)
        if i is None or not _ours_to_mark(
                [(d["path"], bool(d.get("online")), bool(d.get("cordoned")))
                 for d in doc["brokers"][i]["log_dirs"]], path):
            continue
        doc["brokers"] = list(doc["brokers"])
        doc["brokers"][i] = {**doc["brokers"][i], "log_dirs": [
            {**d, "cordoned": True} if d["path"] == path else d
            for d in doc["brokers"][i]["log_dirs"]]}


def mark_offline(doc: dict[str, Any], dirs: Iterable[tuple[int, str]]) -> None:
    """Mark ``dirs`` offline in a snapshot document (adding a dir it does not list). The
    brokers it changes are copied first: the document's entries may be the model's."""
    index = {b["id"]: i for i, b in enumerate(doc["brokers"])}
    doc["brokers"] = list(doc["brokers"])
    for broker, path in dirs:
        i = index.get(broker)
        if i is None:
            continue
        b = doc["brokers"][i] = {**doc["brokers"][i], "log_dirs": [
            dict(d) for d in doc["brokers"][i]["log_dirs"]]}
        for d in b["log_dirs"]:
            if d["path"] == path:
                d.update(online=False, total_bytes=None, usable_bytes=None)
                break
        else:
            b["log_dirs"].append({"path": path, "online": False})


def with_dirs_marked(snapshot: Snapshot, offline: Iterable[tuple[int, str]],
                     cordoned: Iterable[tuple[int, str]]) -> Snapshot:
    """`mark_offline` then `mark_cordoned` on a decoded snapshot: a new one, the same as
    the document path would read."""
    brokers = {b.id: b for b in snapshot.brokers}
    for broker, path in offline:
        b = brokers.get(broker)
        if b is None:
            continue
        if any(d.path == path for d in b.log_dirs):
            dirs = tuple(dataclasses.replace(d, online=False, total_bytes=None,
                                             usable_bytes=None) if d.path == path else d
                         for d in b.log_dirs)
        else:
            dirs = (*b.log_dirs, LogDir(path, False))
        brokers[broker] = dataclasses.replace(b, log_dirs=dirs)
    for broker, path in cordoned:
        b = brokers.get(broker)
        if b is None or not _ours_to_mark(
                [(d.path, d.online, d.cordoned) for d in b.log_dirs], path):
            continue
        brokers[broker] = dataclasses.replace(b, log_dirs=tuple(
            dataclasses.replace(d, cordoned=True) if d.path == path else d
            for d in b.log_dirs))
    marked: tuple[Broker, ...] = tuple(brokers.values())
    return dataclasses.replace(snapshot, brokers=marked, replicas_by_dir={})


class Proposer:
    """Turns decisions into validated action records."""

    def __init__(self, read_snapshot: ReadSnapshot, disk_skew_threshold: float = 1.10,
                 read_delta: ReadSnapshot | None = None,
                 keeper: SnapshotKeeper | None = None) -> None:
        self.read_delta = read_delta or read_snapshot
        self.threshold = disk_skew_threshold
        # Each cluster's latest full snapshot, decoded once and kept (streams/keeper.py):
        # a failure's delta is applied to it in memory.
        self.keeper = keeper or SnapshotKeeper(read_snapshot)
        self._model: tuple[tuple[Any, ...], ClusterModel] | None = None

    def base(self, ref: SnapshotRef, cluster_id: str) -> Snapshot:
        """The snapshot at ``ref``, from memory when it is the one kept."""
        return self.keeper.get(ref, cluster_id)

    def model(self, decision: Decision) -> ClusterModel:
        """The cluster model of the decision's snapshot (+ its failure's delta) with its
        held dirs offline."""
        ref = decision.snapshot
        if ref is None:
            raise ValueError(f"a {decision.type} decision carries no snapshot to plan from")
        key = (ref, decision.delta, decision.cluster_id, decision.offline_dirs,
               decision.cordoned)
        if self._model is not None and self._model[0] == key:
            return self._model[1]
        snapshot: Snapshot | None = self.base(ref, decision.cluster_id)
        if decision.delta is not None:
            raw = self.read_delta(decision.delta, decision.cluster_id)
            try:
                delta = check_delta(raw)
            except RecordError as exc:
                raise LookupError(f"the delta at offset {decision.delta.offset}: {exc}") from None
            assert snapshot is not None
            snapshot = snapshot_with_delta(snapshot, delta)
            if snapshot is None:  # does not hold together: the document path words why
                doc = apply_delta(msgspec.json.decode(self.keeper.read(ref, decision.cluster_id)),
                                  msgspec.json.decode(raw))
                mark_offline(doc, decision.offline_dirs)
                mark_cordoned(doc, decision.cordoned)
                snapshot = snapshot_from_dict(doc)
        assert snapshot is not None
        model = ClusterModel(with_dirs_marked(snapshot, decision.offline_dirs,
                                              decision.cordoned))
        self._model = (key, model)
        return model

    def actions(self, decision: Decision, created_at: str | None = None) -> list[Action]:
        """The actions for one decision: none when the planner finds nothing to do."""
        created = created_at or clock.text()
        if decision.type == PAGE:
            dirs = [d for b, d in decision.offline_dirs if b == decision.broker]
            return [self._page(decision, decision.reason, dirs, created)]
        try:
            model = self.model(decision)
            if decision.type == FIX_OFFLINE:
                return self._fix_offline(decision, model, created)
            if decision.type == DEAD_BROKER:
                return self._fix_dead_broker(decision, model, created)
            if decision.type == MOVE_DIRS:
                return self._move_dirs(decision, model, created)
            if decision.type == REBALANCE_LEADERS:
                return self._leaders(decision, model, created)
            if decision.type == ASSIGN_CONSUMERS:
                return self._consumers(decision, model, created)
            if decision.type in (CORDON_DIR, UNCORDON_DIR):
                return self._cordon(decision, model, created)
        except (SnapshotError, PlanError, LookupError) as exc:
            # The detector saw a problem the planner cannot handle (or the snapshot is
            # gone from the bus): a person must look. Failing the batch instead would
            # replay it forever.
            return [self._page(decision, f"{decision.reason}, but no plan could be made: "
                               f"{exc}; look at the cluster by hand", [], created)]
        raise ValueError(f"unknown decision type {decision.type!r}")

    def _action(self, decision: Decision, type: str, plan: Any, reason: str, created: str,
                bytes_moved: int = 0, received: Iterable[Receiving] | None = None) -> Action:
        return build_action(
            decision.cluster_id, type, plan, reason=reason,
            trigger=Trigger(decision.trigger_kind, decision.broker, decision.log_dir),
            event_time=clock.text(clock.from_epoch_ms(decision.event_time)),
            bytes_moved=bytes_moved, created_at=created, received=received)

    def _page(self, decision: Decision, message: str, dirs: list[str],
              created: str, partitions: tuple[Any, ...] = ()) -> Action:
        brokers = [decision.broker] if decision.broker is not None else []
        plan: dict[str, Any] = {"message": message, "brokers": brokers,
                                "log_dirs": sorted(dirs)}
        if partitions:
            plan["partitions"] = [{"topic": p.topic, "partition": p.partition}
                                  for p in partitions]
        return self._action(decision, PAGE, plan, message, created)

    def _fix_offline(self, decision: Decision, model: ClusterModel, created: str) -> list[Action]:
        broker, path = decision.broker, decision.log_dir
        degraded = broker in model.brokers_with_offline_dir
        # A replica on the dir: listed there, or with its dir unknown on that broker
        # (DescribeLogDirs lists nothing of a failed dir). From the per-dir index: no
        # record made for a partition elsewhere (the model may be the core's columns).
        on_dir: dict[tuple[str, int], int] = {}
        index: dict[tuple[str, int], int] = {}
        by_dir = model.replicas_by_dir
        for slot in dict.fromkeys([(broker, path), *([(broker, None)] if degraded else [])]):
            bucket = by_dir.get(slot)  # type: ignore[arg-type]
            for i in bucket.partitions if bucket is not None else ():
                p = model.partitions[i]
                index[(p.topic, p.partition)] = i
                on_dir[(p.topic, p.partition)] = max(r.size_bytes for r in p.replicas)
        where = f"log dir {path} on broker {broker} is offline"
        return self._re_replicate(decision, model, created, on_dir, where,
                                  [path] if path else [], index)

    def _fix_dead_broker(self, decision: Decision, model: ClusterModel,
                         created: str) -> list[Action]:
        broker = decision.broker
        held: dict[tuple[str, int], int] = {}
        index: dict[tuple[str, int], int] = {}
        for (b, _), bucket in model.replicas_by_dir.items():
            if b != broker:
                continue
            for i in bucket.partitions:
                p = model.partitions[i]
                index[(p.topic, p.partition)] = i
                held[(p.topic, p.partition)] = max(r.size_bytes for r in p.replicas)
        return self._re_replicate(decision, model, created, held, decision.reason, [], index)

    def _re_replicate(self, decision: Decision, model: ClusterModel, created: str,
                      on_dir: dict[tuple[str, int], int], where: str,
                      dirs: list[str],
                      index: dict[tuple[str, int], int] | None = None) -> list[Action]:
        """A fix for the partitions that lost a replica (``on_dir``: their sizes; ``index``:
        where they are in the model, when known), and a page for those reassignment
        cannot repair."""
        from core.plan.offline import plan_offline, received

        if not on_dir:
            return []
        plan = plan_offline(model)
        targets = tuple(a for a in plan.reassignment.partitions
                        if (a.topic, a.partition) in on_dir)
        lost = tuple(u for u in plan.unrecoverable if (u.topic, u.partition) in on_dir)
        index = index if index is not None else model.partition_index()
        copied = 0
        for a in targets:
            before = {r.broker for r in model.partitions[index[(a.topic, a.partition)]].replicas}
            copied += on_dir[(a.topic, a.partition)] * len(set(a.replicas) - before)
        out: list[Action] = []
        if targets:
            reason = (f"{where}; {len(targets)} partition(s) lost their replica there: "
                      f"reassign them to healthy brokers, rack-aware ({human_bytes(copied)} "
                      "to copy)")
            got = [Receiving(r.broker, r.bytes, r.replicas)
                   for r in received(model, targets, index)]
            out.append(self._action(decision, FIX_OFFLINE,
                                    OfflinePlan(Reassignment(targets), lost), reason, created,
                                    copied, got))
        if lost:
            steps = _same_broker(model, decision.broker, dirs, lost, on_dir)
            out.append(self._page(decision, _lost_message(where, lost, steps), dirs, created,
                                  lost))
        return out

    def _move_dirs(self, decision: Decision, model: ClusterModel, created: str) -> list[Action]:
        from core.plan.disks import plan_disks

        broker = decision.broker
        if broker is None:
            raise ValueError("a move_replica_dirs decision names no broker")
        plan = plan_disks(model, self.threshold)
        moves = [m for m in plan.moves if m.broker == broker]
        if not moves:
            return []
        index = model.partition_index()
        targets: dict[int, str] = {index[(m.topic, m.partition)]: m.target for m in moves}
        entries = []
        for i in sorted(targets):
            p = model.partitions[i]
            brokers = tuple(r.broker for r in p.replicas)
            dirs = tuple(targets[i] if b == broker else ANY_DIR for b in brokers)
            entries.append(PartitionAssignment(p.topic, p.partition, brokers, dirs))
        moved = sum(m.size_bytes for m in moves)
        before = broker_usage(model, broker)
        mean = mean_ratio(before)
        after = {d.path: d.used for d in before}
        for m in moves:
            after[m.source] -= m.size_bytes
            after[m.target] += m.size_bytes
        peak_before = max(d.ratio for d in before) / mean
        peak_after = max(after[d.path] / d.capacity for d in before) / mean
        reason = (f"{decision.reason}: move {len(moves)} replica(s), {human_bytes(moved)}, "
                  f"between its dirs; fullest dir {peak_before:.2f}x -> {peak_after:.2f}x "
                  "the broker mean")
        skipped = tuple(s for s in plan.skipped if s.broker == broker)
        disk_plan = DiskPlan(Reassignment(tuple(entries)), skipped)
        return [self._action(decision, MOVE_DIRS, disk_plan, reason, created, moved)]

    def _leaders(self, decision: Decision, model: ClusterModel, created: str) -> list[Action]:
        from core.plan.leaders import plan_leaders

        plan = plan_leaders(model)
        if not plan.election and not plan.reassignment:
            return []
        reason = (f"{decision.reason}: {len(plan.election)} partition(s) change leader, "
                  f"{len(plan.reassignment.partitions)} replica list(s) reordered (no data "
                  "moves)")
        return [self._action(decision, REBALANCE_LEADERS, plan, reason, created)]

    def _cordon(self, decision: Decision, model: ClusterModel, created: str) -> list[Action]:
        """The detector's cordon or lift, if core/plan/cordon.py agrees on this snapshot
        (a cordon: the dir is online and open and not its broker's last open dir, on a
        cluster that can cordon; a lift: the dir is cordoned, online and even again)."""
        from core.plan.cordon import plan_cordons

        key = (decision.broker, decision.log_dir)
        if key[0] is None or key[1] is None:
            raise ValueError(f"a {decision.type} decision names no broker and dir")
        dir_key = (key[0], key[1])
        level = model.snapshot.metadata_level
        if decision.type == CORDON_DIR:
            # `returned` makes the dir a candidate whatever its fill: the detector has
            # judged why (past the limit, or back from a failure) and says so.
            plan = plan_cordons(model, self.threshold, returned=[dir_key], metadata_level=level)
            hit = [c for c in plan.cordon if (c.broker, c.path) == dir_key]
            reason = decision.reason
        else:
            plan = plan_cordons(model, self.threshold, ours=[dir_key], metadata_level=level)
            hit = [c for c in plan.uncordon if (c.broker, c.path) == dir_key]
            reason = hit[0].reason if hit else ""
        if not hit:
            return []
        return [self._action(decision, decision.type,
                             {"broker": dir_key[0], "log_dir": dir_key[1]}, reason, created)]

    def _consumers(self, decision: Decision, model: ClusterModel, created: str) -> list[Action]:
        """The group's KIP-881 target, planned from the decision's snapshot; nothing when
        the group has left it, its locality no longer trails the plan, or the broker
        assigns it (KIP-848: no target from outside the group applies)."""
        from core.locality import locality, strategy_for
        from core.plan.consumers import plan_consumers

        groups = {g.group: g for g in model.snapshot.consumer_groups}
        group = groups.get(decision.group or "")
        if group is None or group.broker_assigned:
            return []
        plan = plan_consumers(model, group.group, strategy_for(group))
        now, planned = locality(model, group), locality(model, group, plan.assignment)
        if now.ratio is None or planned.ratio is None or planned.ratio <= now.ratio:
            return []
        reason = (f"{decision.reason}. Target: {plan.cross_rack} cross-rack partition(s) of "
                  f"{planned.partitions}; a consumer applies it through the client-side "
                  "helper (Java and KIP-848 groups: follow the diagnosis)")
        return [self._action(decision, ASSIGN_CONSUMERS, plan, reason, created)]


def _same_broker(model: ClusterModel, broker: int | None, dirs: list[str],
                 lost: tuple[Any, ...], sizes: dict[tuple[str, int], int]) -> str:
    """The JBOD steps on the broker itself when no other broker may take a replica lost
    with a failed dir of a broker still up; "" otherwise (a dead broker, every copy gone)."""
    from core.plan.jbod import NO_OTHER_BROKER, same_broker_steps

    stuck = [u for u in lost if NO_OTHER_BROKER in u.reason]
    if not dirs or broker is None or not stuck or not model.can_host(broker):
        return ""
    need = sum(sizes.get((u.topic, u.partition), 0) for u in stuck)
    return same_broker_steps(model, broker, dirs, need)


def _lost_message(where: str, lost: tuple[Any, ...], steps: str = "") -> str:
    """What the operator must know about partitions reassignment cannot repair: one line
    per cause (every copy offline; no broker left to take one), naming the topics."""
    by_reason: dict[str, dict[str, int]] = {}
    for u in lost:
        topics = by_reason.setdefault(u.reason, {})
        topics[u.topic] = topics.get(u.topic, 0) + 1
    parts = []
    for reason, topics in by_reason.items():
        named = [f"{t} ({n} partition{'s' if n > 1 else ''})" for t, n in sorted(topics.items())]
        shown = ", ".join(named[:10]) + (f" and {len(named) - 10} more topics"
                                        if len(named) > 10 else "")
        parts.append(f"{reason}: {shown}")
    return (f"{where} and reassignment cannot repair {len(lost)} partition(s) there; "
            + "; ".join(parts) + ". "
            + (steps or "Replace the disk and restart the broker, or add brokers"))


def describe(action: Action) -> str:
    """One line for the job's output."""
    t = action.trigger
    where = [f"broker {t.broker}"] if t.broker is not None else []
    where += [t.log_dir] if t.log_dir else []
    return (f"{action.type} {action.action_id[:12]} ({', '.join([t.kind, *where])}; "
            f"{action.summary.partitions} partitions): {action.reason}")
