"""Which of the product's versioned calls each broker answers (ApiVersions), and the ones
some brokers of a mixed-version cluster cannot take (a rolling upgrade).

The product uses a call only where every broker it concerns supports it:

- kafka-python negotiates each connection's versions itself, never above the broker's;
- log-dir cordons wait for metadata.version 4.3-IV0, which a controller finalises only
  when every registered broker supports it (`core.plan.cordon.unsupported`), so no
  broker without DescribeLogDirs v5 is ever asked to cordon;
- ConsumerGroupDescribe is asked only of groups ListGroups types as KIP-848 groups, which
  only a coordinator that has it reports.

What is left is to say it: one line naming each call some brokers lack, and which ones
(`gap_line`), in the collector's log and in `selfheal doctor`. And one trap: kafka-python
clamps every connection to the versions of the first bootstrap broker it reached, for
the client's life (kafka/net/connection.py `_get_api_versions`), so a client opened
before an upgrade keeps speaking the old versions to every upgraded broker (no
`IsCordoned` read): `behind` tells its holder to reopen it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# broker -> api key -> (min, max) version, from the broker's ApiVersions answer
Versions = Mapping[int, Mapping[int, tuple[int, int]]]


@dataclass(frozen=True)
class Capability:
    """One versioned call the product makes, and what it does where a broker lacks it."""

    call: str  # as Kafka names it, with the version: "DescribeLogDirs v5"
    api_key: int
    version: int
    gives: str
    without: str


DESCRIBE_LOG_DIRS, LIST_GROUPS, CONSUMER_GROUP_DESCRIBE = 35, 16, 69

CAPABILITIES: tuple[Capability, ...] = (
    Capability("DescribeLogDirs v4", DESCRIBE_LOG_DIRS, 4, "dir capacity",
               "their dirs' capacity is the node exporter's or unknown"),
    Capability("DescribeLogDirs v5", DESCRIBE_LOG_DIRS, 5, "log-dir cordons",
               "no dir is cordoned anywhere until every broker has it"),
    Capability("ListGroups v5", LIST_GROUPS, 5, "group types",
               "the groups they coordinate are read as classic groups"),
    Capability("ConsumerGroupDescribe", CONSUMER_GROUP_DESCRIBE, 0, "KIP-848 groups",
               "no KIP-848 group is read from them"),
)


@dataclass(frozen=True)
class Gap:
    """A call some brokers answer and others do not."""

    capability: Capability
    missing: tuple[int, ...]
    having: tuple[int, ...]


def supports(versions: Mapping[int, tuple[int, int]], capability: Capability) -> bool:
    found = versions.get(capability.api_key)
    return found is not None and found[0] <= capability.version <= found[1]


def gaps(versions: Versions) -> list[Gap]:
    """The calls the brokers disagree on, in `CAPABILITIES` order; none when every broker
    (or no broker) has each one: a cluster of one version has no gap."""
    out = []
    for capability in CAPABILITIES:
        having = tuple(b for b in sorted(versions) if supports(versions[b], capability))
        missing = tuple(b for b in sorted(versions) if b not in having)
        if having and missing:
            out.append(Gap(capability, missing, having))
    return out


def _names(brokers: Iterable[int]) -> str:
    ids = list(brokers)
    return ("broker " if len(ids) == 1 else "brokers ") + ", ".join(map(str, ids))


def gap_line(found: list[Gap]) -> str | None:
    """The gaps in one line (None when there are none)."""
    if not found:
        return None
    parts = [f"{g.capability.call} ({g.capability.gives}) not on {_names(g.missing)}, "
             f"only on {_names(g.having)}: {g.capability.without}" for g in found]
    return ("brokers run different Kafka versions (a rolling upgrade?); calls the product "
            "cannot make to all of them: " + "; ".join(parts) + ". Finish the upgrade "
            "to use them everywhere")


def behind(used: Mapping[int, tuple[int, int]], versions: Versions) -> list[str]:
    """The calls every broker in ``versions`` supports but a client whose negotiated
    versions are ``used`` will not make (kafka-python's clamp to its first bootstrap
    broker): reopen the client when this is not empty."""
    if not versions:
        return []
    return [c.call for c in CAPABILITIES
            if not supports(used, c) and all(supports(v, c) for v in versions.values())]


def used_versions(admin: Any) -> dict[int, tuple[int, int]]:
    """The versions a kafka-python admin negotiated (the clamp every connection of it
    keeps); empty before it reached a broker."""
    data = getattr(getattr(admin, "_manager", None), "broker_version_data", None)
    return dict(getattr(data, "api_versions", None) or {})


def broker_versions(admin: Any, broker: int) -> dict[int, tuple[int, int]] | None:
    """One broker's own ApiVersions answer (not the admin's clamped copy); None when it
    does not answer. kafka-python has no public call for it: its connection manager
    sends the request, as `selfheal doctor`'s DescribeConfigs probe does."""
    from kafka.protocol.metadata import ApiVersionsRequest

    manager = getattr(admin, "_manager", None)
    if manager is None:
        return None  # not a kafka-python admin

    async def ask() -> Any:
        request = ApiVersionsRequest(
            client_software_name=manager.config["client_software_name"],
            client_software_version=manager.config["client_software_version"])
        return await manager.send(request, node_id=broker)

    try:
        reply = manager.run(ask)
    except Exception:  # noqa: BLE001 - a broker that does not answer has no say here
        return None
    if reply.error_code:
        return None
    return {k.api_key: (k.min_version, k.max_version) for k in reply.api_keys}


def read_versions(admin: Any, brokers: Iterable[int]) -> dict[int, dict[int, tuple[int, int]]]:
    """Every answering broker's ApiVersions, a bounded number at a time."""
    from core.live import per_broker

    asked = per_broker(lambda b: broker_versions(admin, b), brokers)
    return {b: v for b, v in asked.items() if v is not None}


def cordoned_dirs(admin: Any, broker: int) -> set[str] | None:
    """The broker's cordoned dirs, read with DescribeLogDirs at the broker's own newest
    version rather than the admin's clamped one: a process started before the upgrade
    (serve) would otherwise never see a cordon. None when the broker does not say its
    versions; an empty set when it has no v5 (no cordons before Kafka 4.3)."""
    from kafka.protocol.admin import DescribeLogDirsRequest

    own = broker_versions(admin, broker)
    if own is None:
        return None
    top = min(own.get(DESCRIBE_LOG_DIRS, (0, 0))[1], DescribeLogDirsRequest.max_version)
    if top < 5:
        return set()
    manager = admin._manager

    async def ask() -> Any:
        request = DescribeLogDirsRequest(version=top, topics=[])
        return await manager.send(request, node_id=broker)

    return {r.log_dir for r in manager.run(ask).results if r.is_cordoned}
