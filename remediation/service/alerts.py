"""Alertmanager webhooks: parse (payload version 4), deduplicate, link to open actions.

An alert about an offline log dir, replica or partition names a broker and usually a
log dir; the action the executor proposed for the same broker and dir is the fix the
pager's one-click link should approve. Alertmanager repeats notifications (repeat_interval,
several replicas in HA), so each (group, fingerprint, status) is handled once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core import clock
from remediation.executor.actions import stored_action
from remediation.executor.store import ActionRow, ActionStore
from remediation.executor.store_side import AlertRow
from schemas import wire
from schemas.registry import RecordError

OFFLINE_ALERTS: frozenset[str] = frozenset(
    {"KafkaLogDirOffline", "KafkaOfflinePartitions", "KafkaOfflineReplicas"}
)
LINKABLE_TYPES = ("fix_offline_replicas", "page_operator")  # preferred in this order
_STATUSES = frozenset({"firing", "resolved"})
_ZERO_TIME = "0001-01-01T00:00:00Z"  # Alertmanager's endsAt of an alert still firing


class AlertPayloadError(ValueError):
    """A webhook body that is not an Alertmanager version 4 payload; names the field."""


@dataclass(frozen=True, slots=True)
class Alert:
    status: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    starts_at: datetime
    ends_at: datetime | None
    fingerprint: str
    generator_url: str = ""

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "")


@dataclass(frozen=True, slots=True)
class Webhook:
    version: str
    group_key: str
    status: str
    receiver: str
    alerts: tuple[Alert, ...]


@dataclass(frozen=True, slots=True)
class Received:
    """One alert of a webhook: whether it was new, and the action it is linked to."""

    alert: Alert
    new: bool
    action_id: str | None


def parse_webhook(body: str | bytes | Mapping[str, Any]) -> Webhook:
    """Validate an Alertmanager webhook body; raise AlertPayloadError naming the bad field."""
    if isinstance(body, str | bytes):
        try:
            body = wire.decode("alertmanager-webhook", body)
        except RecordError as exc:
            raise AlertPayloadError(f"webhook body: {exc.problem}") from None
    if not isinstance(body, Mapping):
        raise AlertPayloadError("webhook body must be a JSON object")
    version = _str(body, "version", "")
    if version != "4":
        raise AlertPayloadError(f"version: expected Alertmanager webhook version \"4\", got "
                                f"{version!r}")
    alerts = body.get("alerts")
    if not isinstance(alerts, list):
        raise AlertPayloadError("alerts: missing or not a list")
    return Webhook(
        version=version,
        group_key=_str(body, "groupKey", ""),
        status=_status(body, ""),
        receiver=body.get("receiver", "") if isinstance(body.get("receiver"), str) else "",
        alerts=tuple(_alert(a, f"alerts[{i}].") for i, a in enumerate(alerts)),
    )


def link_alert(alert: Alert, actions: Iterable[ActionRow]) -> ActionRow | None:
    """The open action an offline-storage alert is about, or None.

    Best first: trigger on the same broker and log dir; trigger on the same broker; a
    page or an untriggered fix naming the broker in its summary. Ties go to the
    preferred type (a fix before a page), then to the newest action.
    """
    if alert.name not in OFFLINE_ALERTS:
        return None
    try:
        broker = int(alert.labels.get("broker", ""))
    except ValueError:
        return None  # a cluster-wide alert: no one action is "the" fix
    log_dir = _dir(alert.labels.get("log_dir"))
    cluster = alert.labels.get("cluster_id") or alert.labels.get("cluster")
    best: tuple[int, int, str, str] | None = None
    chosen: ActionRow | None = None
    for row in actions:
        if not row.open or row.type not in LINKABLE_TYPES:
            continue
        if cluster is not None and row.cluster != cluster:
            continue
        score = _score(row, broker, log_dir)
        if score == 0:
            continue
        key = (score, -LINKABLE_TYPES.index(row.type), row.created_at, row.id)
        if best is None or key > best:
            best, chosen = key, row
    return chosen


def receive(store: ActionStore, webhook: Webhook) -> tuple[Received, ...]:
    """Record each alert once and link it to its open action in the store.

    A repeated notification is not new, but if it was not linked yet it is tried again:
    the alert may have fired before the action was proposed.
    """
    out: list[Received] = []
    open_rows: tuple[ActionRow, ...] | None = None
    for alert in webhook.alerts:
        key = (webhook.group_key, alert.fingerprint, alert.status)
        new = store.record_alert(*key, alert.labels, alert.annotations,
                                 clock.text(alert.starts_at))
        seen = None if new else store.alert(*key)
        action_id = seen.action_id if seen is not None else None
        if action_id is None and alert.name in OFFLINE_ALERTS:
            if open_rows is None:
                open_rows = store.open_actions()
            row = link_alert(alert, open_rows)
            if row is not None:
                action_id = row.id
                store.set_alert_action(*key, row.id)
        out.append(Received(alert, new, action_id))
    return tuple(out)


def stored_alert(row: AlertRow) -> Alert:
    """The alert as it was received, for the approval page."""
    starts = clock.parse(row.starts_at or row.received_at)
    return Alert(status=row.status, labels=row.labels, annotations=row.annotations,
                 starts_at=starts, ends_at=None, fingerprint=row.fingerprint)


def _score(row: ActionRow, broker: int, log_dir: str | None) -> int:
    action = stored_action(row.record)  # rows were validated when they were proposed
    if action.is_page:
        brokers = set(action.plan.get("brokers", ())) | {action.trigger.broker}
        dirs = {_dir(d) for d in action.plan.get("log_dirs", ())} | {_dir(action.trigger.log_dir)}
    else:
        brokers, dirs = {action.trigger.broker}, {_dir(action.trigger.log_dir)}
    if broker in brokers:
        if log_dir is not None and log_dir in dirs:
            return 3
        if log_dir is None or dirs <= {None}:
            return 2
        return 0  # same broker, another dir: a different failure
    # Without a trigger broker (e.g. found in a snapshot) the summary is all we have;
    # with one, summary.brokers also lists the brokers the fix copies *to*.
    if action.trigger.broker is None and broker in action.summary.brokers:
        return 1
    return 0


def _dir(path: str | None) -> str | None:
    """JMX quotes the path in the MBean name; an exporter may keep the quotes."""
    if path is None:
        return None
    path = path.strip().strip('"')
    return path.rstrip("/") or path or None


def _str(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise AlertPayloadError(f"{where}{key}: missing or not a string")
    return value


def _status(obj: Mapping[str, Any], where: str) -> str:
    status = _str(obj, "status", where)
    if status not in _STATUSES:
        raise AlertPayloadError(f"{where}status: must be firing or resolved, got {status!r}")
    return status


def _labels(obj: Mapping[str, Any], key: str, where: str) -> dict[str, str]:
    value = obj.get(key)
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise AlertPayloadError(f"{where}{key}: must be an object of string to string")
    return dict(value)


def _time(obj: Mapping[str, Any], key: str, where: str) -> datetime | None:
    text = _str(obj, key, where)
    if text.startswith("0001-01-01"):
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise AlertPayloadError(f"{where}{key}: not an RFC 3339 time: {text!r}") from None
    if value.tzinfo is None:
        raise AlertPayloadError(f"{where}{key}: RFC 3339 needs an offset, got {text!r}")
    return value


def _alert(obj: Any, where: str) -> Alert:
    if not isinstance(obj, Mapping):
        raise AlertPayloadError(f"{where[:-1]}: must be an object")
    starts = _time(obj, "startsAt", where)
    if starts is None:
        raise AlertPayloadError(f"{where}startsAt: must be a real time, got {_ZERO_TIME}")
    fingerprint = _str(obj, "fingerprint", where)
    if not fingerprint:
        raise AlertPayloadError(f"{where}fingerprint: must not be empty")
    url = obj.get("generatorURL", "")
    return Alert(
        status=_status(obj, where),
        labels=_labels(obj, "labels", where),
        annotations=_labels(obj, "annotations", where),
        starts_at=starts,
        ends_at=_time(obj, "endsAt", where),
        fingerprint=fingerprint,
        generator_url=url if isinstance(url, str) else "",
    )
