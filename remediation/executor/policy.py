"""Policy: which actions run by themselves, which wait for a human, which never run.

`Policy.decide` is pure: the action, the cluster's health and the bytes moved in the last
hour in, a Ruling out. Approval is required when the policy says so, when a limit would
be exceeded, or when the circuit breaker trips (too many brokers or log dirs failing at
once smells like a wider outage, where moving data makes things worse): then nothing runs
by itself and the operator is paged.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from schemas.records import ACTION_TYPES, Action

if TYPE_CHECKING:
    from core.model import ClusterModel

Mode = Literal["auto", "approve", "refuse"]
MODES: frozenset[str] = frozenset({"auto", "approve"})  # what a policy file may say
_T = TypeVar("_T", "Limits", "Breaker")
MiB = 1024 * 1024
GiB = 1024 * MiB

DEFAULT_MODES: dict[str, str] = {
    # Inter-broker copies of offline replicas move a lot of data across racks: a human
    # confirms the first ones; intra-broker moves and leader reorders are cheap and local.
    "fix_offline_replicas": "approve",
    "move_replica_dirs": "auto",
    "rebalance_leaders": "auto",
    "assign_consumers": "auto",
    "page_operator": "approve",
}
# What each [actions] key governs (docs/config-reference.md is generated from these).
ACTIONS_DOC = ("\"auto\" runs by itself within [limits]; \"approve\" waits for a human "
               "(the one-click link).")
MODE_DOCS: dict[str, str] = {
    "fix_offline_replicas": "Inter-broker copies of replicas from a failed dir or broker.",
    "move_replica_dirs": "Intra-broker moves between a broker's own disks.",
    "rebalance_leaders": "Reordered replica lists and a preferred election; no data moves.",
    "assign_consumers": "KIP-881 rack-aware targets for opted-in consumer groups.",
    "page_operator": "Always a human (replace a disk, restart a broker): only \"approve\".",
}


class PolicyError(ValueError):
    """A policy file that cannot be used; the message names the key and the fix."""


def _key(default: Any, doc: str) -> Any:
    return field(default=default, metadata={"doc": doc})


@dataclass(frozen=True, slots=True)
class Limits:
    """Larger actions wait for approval instead of running by themselves."""

    max_partitions_per_action: int = _key(100, "Partitions one action may move by itself.")
    max_bytes_per_hour: int = _key(100 * GiB, "Bytes moved per rolling hour by actions "
                                              "running by themselves.")
    max_concurrent_reassignments_per_broker: int = _key(
        2, "Reassignments in flight touching one broker before another waits.")
    intra_broker_throttle_bytes_per_s: int = _key(
        100 * MiB, "replica.alter.log.dirs.io.max.bytes.per.second while a dir move runs.")
    inter_broker_throttle_bytes_per_s: int = _key(
        50 * MiB, "leader/follower.replication.throttled.rate while a reassignment runs.")
    approval_ttl_seconds: int = _key(3600, "An action waiting longer expires (re-detected, "
                                           "it is proposed again).")


@dataclass(frozen=True, slots=True)
class Breaker:
    """Trips when more than these fail at once: nothing runs by itself, the operator is
    paged."""

    max_failed_brokers: int = _key(1, "Brokers down or with an offline log dir (K).")
    max_failed_log_dir_percent: float = _key(25.0, "Of all log dirs in the cluster (P).")


@dataclass(frozen=True, slots=True)
class ClusterHealth:
    """What the executor knows of the cluster right now (from the latest snapshot)."""

    brokers: int
    failed_brokers: int = 0  # down, or up with an offline log dir

    log_dirs: int = 0
    failed_log_dirs: int = 0
    brokers_with_offline_dir: frozenset[int] = frozenset()
    # broker id -> reassignments in progress that touch it
    reassignments_in_flight: Mapping[int, int] = field(default_factory=dict)

    @classmethod
    def from_model(cls, model: ClusterModel,
                   reassignments_in_flight: Mapping[int, int] | None = None) -> ClusterHealth:
        """Health from the latest snapshot; in-flight counts come from the Admin API."""
        dead = {b for b in model.brokers if b not in model.alive}
        return cls(
            brokers=len(model.brokers),
            failed_brokers=len(dead | model.brokers_with_offline_dir),
            log_dirs=sum(len(d) for d in model.dirs.values()),
            failed_log_dirs=len(model.offline_dirs),
            brokers_with_offline_dir=model.brokers_with_offline_dir,
            reassignments_in_flight=dict(reassignments_in_flight or {}),
        )

    @property
    def failed_log_dir_percent(self) -> float:
        return 100.0 * self.failed_log_dirs / self.log_dirs if self.log_dirs else 0.0


@dataclass(frozen=True, slots=True)
class Ruling:
    """What policy rules for one action: run by itself, wait for a person, or page."""

    mode: Mode
    reasons: tuple[str, ...]
    page: bool = False


@dataclass(frozen=True, slots=True)
class Policy:
    modes: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_MODES))
    limits: Limits = Limits()
    breaker: Breaker = Breaker()

    def decide(self, action: Action, health: ClusterHealth, moved_bytes_last_hour: int) -> Ruling:
        """Run by itself, wait for approval, or refuse; with every reason that applied."""
        refusals = _refusals(action, health)
        if refusals:
            return Ruling("refuse", tuple(refusals), page=action.is_page)
        reasons: list[str] = []
        page = action.is_page
        if action.is_page:
            reasons.append("a page is for a human: software cannot do this")
        elif self.modes[action.type] == "approve":
            reasons.append(f"policy: {action.type} needs approval")
        tripped = self._breaker(health)
        if tripped:
            reasons.append(tripped)
            page = True
        reasons.extend(self._limits(action, health, moved_bytes_last_hour))
        if reasons:
            return Ruling("approve", tuple(reasons), page)
        return Ruling("auto", (f"policy: {action.type} runs by itself within limits",), page)

    def _breaker(self, health: ClusterHealth) -> str | None:
        k, p = self.breaker.max_failed_brokers, self.breaker.max_failed_log_dir_percent
        if health.failed_brokers > k:
            return (f"circuit breaker: {health.failed_brokers} brokers failing at once (limit "
                    f"{k}); nothing runs by itself until an operator looks")
        if health.failed_log_dir_percent > p:
            return (f"circuit breaker: {health.failed_log_dirs} of {health.log_dirs} log dirs "
                    f"failing ({health.failed_log_dir_percent:.0f}% > {p:g}%); nothing runs "
                    "by itself until an operator looks")
        return None

    def _limits(self, action: Action, health: ClusterHealth, moved: int) -> list[str]:
        lim, out = self.limits, []
        if action.summary.partitions > lim.max_partitions_per_action:
            out.append(f"limit: {action.summary.partitions} partitions in one action "
                       f"(max_partitions_per_action = {lim.max_partitions_per_action})")
        if action.summary.bytes and moved + action.summary.bytes > lim.max_bytes_per_hour:
            out.append(f"limit: {moved} + {action.summary.bytes} bytes would exceed "
                       f"max_bytes_per_hour = {lim.max_bytes_per_hour}")
        if action.targets() and action.type != "move_replica_dirs":
            busy = sorted(b for b in action.summary.brokers
                          if health.reassignments_in_flight.get(b, 0)
                          >= lim.max_concurrent_reassignments_per_broker)
            if busy:
                out.append(f"limit: brokers {busy} already run "
                           f"{lim.max_concurrent_reassignments_per_broker} reassignments "
                           "(max_concurrent_reassignments_per_broker)")
        return out


def _refusals(action: Action, health: ClusterHealth) -> list[str]:
    if action.type != "move_replica_dirs":
        return []
    blocked = sorted({t.replicas[i] for t in action.targets() for i in range(len(t.replicas))
                      if t.log_dirs and t.log_dirs[i] != "any"}
                     & health.brokers_with_offline_dir)
    # Kafka refuses AlterReplicaLogDirs on a broker with any offline dir (KIP-113).
    return [f"broker {b} has an offline log dir; intra-broker moves are refused until it is "
            "fixed or removed from log.dirs" for b in blocked]


# --- loading -------------------------------------------------------------------------------


def policy_for(configured: str | Path | None, override: str | Path | None = None) -> Policy:
    """The policy a command runs with: `override` (--policy), else the configured file,
    else the built-in defaults."""
    path = override or configured
    return load_policy(path) if path else Policy()


def load_policy(path: str | Path) -> Policy:
    """Read a TOML policy file; keys left out keep their defaults."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PolicyError(f"policy file {p} not found; copy remediation/executor/"
                          "policy.example.toml there or leave the setting unset") from None
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"{p}: not valid TOML: {exc}") from None
    return policy_from_mapping(data, str(p))


def policy_from_mapping(data: Mapping[str, Any], source: str = "policy") -> Policy:
    """Build a Policy from parsed TOML, naming any unknown key or wrong type."""
    _known(data, {"actions", "limits", "breaker"}, source, "")
    modes = dict(DEFAULT_MODES)
    actions = _table(data, "actions", source)
    _known(actions, frozenset(ACTION_TYPES), source, "actions.")
    for name, value in actions.items():
        if value not in MODES:
            raise PolicyError(f"{source}: actions.{name} = {value!r}; use \"auto\" or \"approve\"")
        if name == "page_operator" and value == "auto":
            raise PolicyError(f"{source}: actions.page_operator cannot be \"auto\": a page "
                              "needs a human; use \"approve\"")
        modes[name] = value
    return Policy(modes, _dataclass(Limits(), _table(data, "limits", source), source, "limits"),
                  _dataclass(Breaker(), _table(data, "breaker", source), source, "breaker"))


def _table(data: Mapping[str, Any], key: str, source: str) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        raise PolicyError(f"{source}: {key} must be a table ([{key}]), got {value!r}")
    return value


def _known(data: Mapping[str, Any], known: frozenset[str] | set[str], source: str,
           prefix: str) -> None:
    for key in data:
        if key not in known:
            raise PolicyError(f"{source}: unknown key {prefix}{key}; known: "
                              + ", ".join(prefix + k for k in sorted(known)))


def _dataclass(default: _T, table: Mapping[str, Any], source: str, name: str) -> _T:
    types = {f.name: f.type for f in fields(default)}
    _known(table, set(types), source, name + ".")
    values: dict[str, Any] = {}
    for key, value in table.items():
        want_float = types[key] in ("float", float)
        ok = (isinstance(value, int | float) if want_float else isinstance(value, int))
        if not ok or isinstance(value, bool):
            kind = "a number" if want_float else "an integer"
            raise PolicyError(f"{source}: {name}.{key} must be {kind}, got {value!r}")
        if value < 0:
            raise PolicyError(f"{source}: {name}.{key} must be >= 0, got {value}")
        if key == "max_failed_log_dir_percent" and value > 100:
            raise PolicyError(f"{source}: {name}.{key} is a percentage (0-100), got {value}")
        values[key] = float(value) if want_float else value
    return replace(default, **values)
