"""Replication throttles: which configs an action sets, and how to put back what was there.

Inter-broker copies (a reassignment) are throttled the way `kafka-reassign-partitions.sh
--throttle` does it: `leader/follower.replication.throttled.rate` on every broker
involved, and on each topic `leader.replication.throttled.replicas` (the replicas that
serve the copy) plus `follower.replication.throttled.replicas` (the new ones). Moves
between a broker's own dirs are throttled by the broker config
`replica.alter.log.dirs.io.max.bytes.per.second`.

The executor saves the values it finds before it changes anything (in the action's
journal, so a restarted executor can still restore them) and restores exactly those
afterwards, with incremental alter configs: a key that was unset is deleted again, a
value an operator had set comes back as it was. A replica list an operator already had
is kept and extended, and "*" (throttle everything) stays "*". A rate an operator already
had that is lower than ours is kept (the stricter wins; never raised), and the audit says
so. A value an operator changes while the action runs is theirs: the restore leaves it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from remediation.executor.view import LiveView
from schemas.records import Action

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
DIR_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
REPLICA_LISTS = frozenset({LEADER_REPLICAS, FOLLOWER_REPLICAS})
RATES = frozenset({LEADER_RATE, FOLLOWER_RATE, DIR_RATE})
MiB = 1024 * 1024

# "broker:3" or "topic:orders" -> {config key: value}; None means "not set".
Configs = dict[str, dict[str, str | None]]
# "broker:3" -> {config key: (value, where from)}: what the broker applies while it has no
# value of its own (the cluster-wide default or its server.properties).
Beneath = dict[str, dict[str, tuple[str, str]]]
_INHERITED = {"DYNAMIC_DEFAULT_BROKER_CONFIG": "the cluster-wide default",
              "STATIC_BROKER_CONFIG": "the server.properties value"}


def resource(kind: str, name: str | int) -> str:
    return f"{kind}:{name}"


def split(key: str) -> tuple[str, str]:
    """'topic:orders' -> ('topic', 'orders'); Kafka topic names never hold ':'."""
    kind, _, name = key.partition(":")
    return kind, name


def inter_broker(action: Action, view: LiveView, rate: int) -> Configs:
    """The throttle configs for an action's reassignment; empty when `rate` is 0 (off)."""
    if rate <= 0:
        return {}
    brokers: set[int] = set()
    leaders: dict[str, set[str]] = {}
    followers: dict[str, set[str]] = {}
    for t in action.targets():
        p = view.partition(t.topic, t.partition)
        if p is None:
            continue
        current = [r.broker for r in p.replicas]
        new = [b for b in t.replicas if b not in current]
        if not new:
            continue  # a reorder moves no data
        # Only online replicas can serve the copy; an offline one is not throttled.
        sources = [r.broker for r in p.replicas if not view.model.is_offline(r)]
        brokers.update(sources, new)
        leaders.setdefault(t.topic, set()).update(f"{t.partition}:{b}" for b in sources)
        followers.setdefault(t.topic, set()).update(f"{t.partition}:{b}" for b in new)
    out: Configs = {resource("broker", b): {LEADER_RATE: str(rate), FOLLOWER_RATE: str(rate)}
                    for b in sorted(brokers)}
    for topic in sorted(set(leaders) | set(followers)):
        out[resource("topic", topic)] = {
            LEADER_REPLICAS: _join(leaders.get(topic, set())),
            FOLLOWER_REPLICAS: _join(followers.get(topic, set())),
        }
    return out


def intra_broker(moves: Mapping[tuple[str, int, int], str], rate: int) -> Configs:
    """The log-dir move throttle on every broker with a move; empty when `rate` is 0."""
    if rate <= 0:
        return {}
    return {resource("broker", b): {DIR_RATE: str(rate)}
            for b in sorted({b for _, _, b in moves})}


def inherited(synonyms: list[dict[str, Any]]) -> tuple[str, str] | None:
    """From DescribeConfigs' synonyms (highest precedence first): the value beneath the
    broker's own and where it comes from; None when only Kafka's default is there."""
    return next(((s["value"], _INHERITED[s["source"]]) for s in synonyms
                 if s["source"] in _INHERITED and s["value"] is not None), None)


def merged(wanted: Configs, found: Configs, beneath: Beneath | None = None) -> Configs:
    """`wanted`, with the replica lists already there kept ("*" stays "*") and a rate
    already there kept when it is lower than ours (or not a number we can compare). A
    broker with no rate of its own applies the one `beneath`; when that is the stricter,
    the key is left out: the broker keeps applying the operator's default."""
    out: Configs = {}
    for res, keys in wanted.items():
        out[res] = {}
        for key, value in keys.items():
            before = found.get(res, {}).get(key)
            below = (beneath or {}).get(res, {}).get(key)
            if key in REPLICA_LISTS and before:
                if before.strip() == "*":
                    value = "*"
                else:
                    value = _join(set(_items(before)) | set(_items(value or "")))
            elif key in RATES and before is not None and _stricter(before, value):
                value = before
            elif key in RATES and before is None and below and _stricter(below[0], value):
                continue
            out[res][key] = value
    return {res: keys for res, keys in out.items() if keys}


def kept(wanted: Configs, found: Configs, beneath: Beneath | None = None) -> list[str]:
    """Audit lines for what an operator had that the action keeps: 'broker 0 keeps the
    existing 20000 B/s, lower than our 50 MiB/s (leader/follower.replication.throttled.rate)',
    'broker 1 keeps the cluster-wide default 20000 B/s, ...' and 'topic orders keeps its
    throttled replicas (leader: 7:2), ours added'."""
    lines = []
    for res, keys in sorted(wanted.items()):
        kind, name = split(res)
        rates: dict[tuple[str, str], list[str]] = {}
        lists: list[str] = []
        for key, value in sorted(keys.items()):
            before = found.get(res, {}).get(key)
            below = (beneath or {}).get(res, {}).get(key)
            if before is None and below is not None and key in RATES \
                    and _stricter(below[0], value):
                rates.setdefault((f"{below[1]} {rate_text(below[0])}", value or ""),
                                 []).append(key)
            if before is None or before == value:
                continue
            if key in RATES and _stricter(before, value):
                rates.setdefault((f"the existing {rate_text(before)}", value or ""),
                                 []).append(key)
            elif key in REPLICA_LISTS and before.strip():
                lists.append(f"{key.split('.')[0]}: {before.strip()}")
        for (before, ours), names in rates.items():
            lines.append(f"{kind} {name} keeps {before}, lower than our {rate_text(ours)} "
                         f"({_names(names)})")
        if lists:
            lines.append(f"{kind} {name} keeps its throttled replicas "
                         f"({'; '.join(lists)}), ours added")
    return lines


def rate_text(value: str) -> str:
    """'52428800' -> '50 MiB/s', '20000' -> '20000 B/s'; anything else as it is."""
    if not value.strip().isdigit():
        return repr(value)
    rate = int(value)
    return f"{rate // MiB} MiB/s" if rate and rate % MiB == 0 else f"{rate} B/s"


def _stricter(before: str, ours: str | None) -> bool:
    """True when the rate found must stay: lower than ours, or one we cannot compare."""
    try:
        return int(before) < int(ours or "0") or int(ours or "0") <= 0
    except ValueError:
        return True


def _names(keys: list[str]) -> str:
    if set(keys) == {LEADER_RATE, FOLLOWER_RATE}:
        return "leader/follower.replication.throttled.rate"
    return ", ".join(keys)


def changes(wanted: Configs, found: Configs) -> Configs:
    """Only the keys whose value differs from what is there."""
    out: Configs = {}
    for res, keys in wanted.items():
        diff = {k: v for k, v in keys.items() if found.get(res, {}).get(k) != v}
        if diff:
            out[res] = diff
    return out


def saved_values(wanted: Configs, found: Configs) -> Configs:
    """What to restore afterwards: the value found for every key the action sets."""
    return {res: {k: found.get(res, {}).get(k) for k in keys} for res, keys in wanted.items()}


def describe(configs: Configs) -> str:
    """One line for the audit: 'broker:1 leader...rate=1000, topic:orders ...'."""
    def value(v: str | None) -> str:
        return "(unset)" if v is None else v

    return "; ".join(f"{res} " + ", ".join(f"{k}={value(v)}" for k, v in sorted(keys.items()))
                     for res, keys in sorted(configs.items()))


def _items(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _join(items: set[str]) -> str:
    def order(item: str) -> tuple[int, int]:
        partition, _, broker = item.partition(":")
        return (int(partition), int(broker)) if partition.isdigit() and broker.isdigit() \
            else (1 << 31, 0)
    return ",".join(sorted(items, key=lambda i: (order(i), i)))
