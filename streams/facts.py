"""Reduce a cluster snapshot to the few facts detection keeps (`SnapshotFacts`).

A snapshot of 100,000 partitions is tens of MB; detection needs which dirs are online,
which brokers are alive, which brokers' disks are skewed and whether leadership is
unbalanced. The planners get the full snapshot again, by its Kafka coordinates, only
when a decision needs it. Skew uses the disk planner's own measure
(`core.plan.disks`), so what is detected is what the planner can fix.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from core.model import ClusterModel
from core.plan.cordon import over_limit_dirs
from core.plan.disks import broker_usage, mean_ratio, over_limit
from schemas.snapshot import Snapshot
from streams.detect_types import GroupFacts, SnapshotFacts

if TYPE_CHECKING:
    from core.config import DetectConfig

K = TypeVar("K")


@dataclass(frozen=True, slots=True)
class FactLimits:
    """The `[detect]` thresholds facts are measured against."""

    disk_skew_threshold: float = 1.10
    disk_skew_min_bytes: int = 1 << 30
    leader_imbalance_threshold: float = 1.10
    # A record dated further ahead of the job's clock is refused: event time is shared
    # by every record of a cluster, and one from 2100 would make all others late.
    max_clock_ahead_ms: int = 300_000

    @classmethod
    def from_config(cls, detect: DetectConfig) -> FactLimits:
        return cls(detect.disk_skew_threshold, detect.disk_skew_min_bytes,
                   detect.leader_imbalance_threshold,
                   int(detect.max_clock_ahead_seconds * 1000))


def snapshot_facts(snapshot: Snapshot, limits: FactLimits = FactLimits()) -> SnapshotFacts:
    """What detection keeps of ``snapshot``."""
    model = ClusterModel(snapshot)
    return SnapshotFacts(
        dirs={b.id: {d.path: d.online for d in b.log_dirs} for b in snapshot.brokers},
        alive={b.id: b.alive for b in snapshot.brokers},
        skewed=skewed_brokers(model, limits),
        leaders=leader_imbalance(model, limits.leader_imbalance_threshold),
        groups=group_facts(model),
        over={b: sorted(over) for b in sorted(model.alive)
              if (over := over_limit_dirs(model, b, limits.disk_skew_threshold))},
        cordoned={b.id: [d.path for d in b.log_dirs if d.cordoned]
                  for b in snapshot.brokers if any(d.cordoned for d in b.log_dirs)},
        metadata_level=snapshot.metadata_level,
    )


def group_facts(model: ClusterModel) -> dict[str, GroupFacts]:
    """Each consumer group's locality now and under its KIP-881 plan, with the causes of
    reading across racks (core/locality.py)."""
    from core.locality import diagnose, locality, planned_locality, strategy_for
    from core.plan.errors import PlanError

    out: dict[str, GroupFacts] = {}
    for group in model.snapshot.consumer_groups:
        now = locality(model, group)
        unplanned = ""
        try:
            if not group.racks_known:  # no plan can place members whose racks are unknown
                planned_ratio, strategy = None, strategy_for(group)
            else:
                planned, strategy = planned_locality(model, group)
                planned_ratio = planned.ratio
        except Exception as exc:  # noqa: BLE001 - a planner failure must not cost the
            # snapshot's other facts (offline dirs, skew): the group is just not judged.
            planned_ratio, strategy = None, strategy_for(group)
            what = str(exc) if isinstance(exc, PlanError) else f"{type(exc).__name__}: {exc}"
            unplanned = f"no KIP-881 plan could be made ({what})"
        diagnosis = diagnose(model, group)
        text = "; ".join(x for x in (diagnosis.text(), unplanned) if x)
        ids = "\n".join(sorted(m.member_id for m in group.members))
        out[group.group] = GroupFacts(
            ratio=None if now.ratio is None else round(now.ratio, 4),
            planned=None if planned_ratio is None else round(planned_ratio, 4),
            strategy=strategy,
            # A group between generations shows a half-made assignment: not judged.
            stable=group.state in (None, "Stable"),
            membership=hashlib.sha256(ids.encode()).hexdigest()[:16],
            no_rack=diagnosis.members_without_rack,
            racks=diagnosis.racks,
            diagnosis=text,
            broker_assigned=group.broker_assigned,
            racks_known=group.racks_known,
        )
    return out


def skewed_brokers(model: ClusterModel, limits: FactLimits) -> dict[int, float]:
    """Broker -> fullest dir over the broker's mean ratio, for the brokers the disk
    planner would touch (alive, no offline dir) whose dirs above the limit hold at least
    ``disk_skew_min_bytes`` too much: a few MB of difference is not worth a move."""
    out: dict[int, float] = {}
    for broker in sorted(model.alive - model.brokers_with_offline_dir):
        dirs = broker_usage(model, broker)
        if len(dirs) < 2:
            continue
        mean = mean_ratio(dirs)
        if mean <= 0:
            continue
        limit = limits.disk_skew_threshold * mean
        excess = sum(
            d.used - limit * d.capacity for d in dirs if over_limit(d.used, limit * d.capacity)
        )
        if excess > 0 and excess >= limits.disk_skew_min_bytes:
            out[broker] = round(max(d.ratio for d in dirs) / mean, 4)
    return out


def _over_share(counts: Mapping[K, int], shares: Mapping[K, float],
                threshold: float) -> K | None:
    """The member furthest above its fair share when one is above both the threshold
    and the next whole number (counts are whole: 4 of 10 on 3 brokers is balanced)."""
    worst, worst_ratio = None, 1.0
    for member, share in shares.items():
        if share <= 0:
            continue
        count = counts.get(member, 0)
        if count > max(math.ceil(share), threshold * share) and count / share > worst_ratio:
            worst, worst_ratio = member, count / share
    return worst


def leader_imbalance(model: ClusterModel, threshold: float) -> str | None:
    """Why leadership is unbalanced across alive brokers or racks, or None."""
    alive = sorted(model.alive)
    if len(alive) < 2:
        return None
    led = Counter(p.leader for p in model.partitions if p.leader in model.alive)
    total = sum(led.values())
    if total == 0:
        return None
    fair = total / len(alive)
    broker = _over_share(led, dict.fromkeys(alive, fair), threshold)
    if broker is not None:
        return (f"broker {broker} leads {led[broker]} partitions; its fair share is "
                f"{fair:.1f} (threshold {threshold:.2f}x)")
    members = Counter(model.rack_of[b] for b in alive if model.rack_of[b] is not None)
    if len(members) < 2:
        return None
    rack_led: Counter[str | None] = Counter()
    for b, n in led.items():
        if model.rack_of[b] is not None:
            rack_led[model.rack_of[b]] += n
    shares = {r: total * n / len(alive) for r, n in members.items()}
    rack = _over_share(rack_led, shares, threshold)
    if rack is None:
        return None
    return (f"rack {rack} leads {rack_led[rack]} partitions; its fair share is "
            f"{shares[rack]:.1f} (threshold {threshold:.2f}x)")
