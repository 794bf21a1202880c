"""Alertmanager webhooks: validated, deduplicated, linked to the open action they are about."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from remediation.executor.actions import parse_action
from remediation.executor.lifecycle import State
from remediation.executor.store import ActionStore
from remediation.service.alerts import (
    AlertPayloadError,
    link_alert,
    parse_webhook,
    receive,
    stored_alert,
)
from tests.unit.action_records import fix_offline, of_type


def alert(name: str = "KafkaLogDirOffline", broker: str = "3", log_dir: str | None = "/data/d2",
          status: str = "firing", fingerprint: str = "f1") -> dict[str, Any]:
    labels = {"alertname": name, "broker": broker, "severity": "page"}
    if log_dir is not None:
        labels["log_dir"] = log_dir
    return {"status": status, "labels": labels,
            "annotations": {"summary": f"log dir {log_dir} offline on broker {broker}"},
            "startsAt": "2026-11-22T03:00:00.123Z", "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "http://prometheus/graph", "fingerprint": fingerprint}


def webhook(*alerts: dict[str, Any], status: str = "firing") -> dict[str, Any]:
    return {"version": "4", "groupKey": "{}:{alertname=\"KafkaLogDirOffline\"}",
            "truncatedAlerts": 0, "status": status, "receiver": "selfheal",
            "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {},
            "externalURL": "http://alertmanager", "alerts": list(alerts)}


@pytest.fixture
def store(tmp_path: Path) -> ActionStore:
    return ActionStore(tmp_path / "a.db")


def test_a_webhook_parses_with_a_firing_alert_that_has_no_end() -> None:
    hook = parse_webhook(json.dumps(webhook(alert())))
    assert hook.status == "firing" and len(hook.alerts) == 1
    first = hook.alerts[0]
    assert first.name == "KafkaLogDirOffline" and first.labels["log_dir"] == "/data/d2"
    assert first.ends_at is None and first.starts_at.tzinfo is not None


def _without(path: str) -> dict[str, Any]:
    body = webhook(alert())
    obj: Any = body
    *parents, last = path.split(".")
    for key in parents:
        obj = obj[int(key)] if key.isdigit() else obj[key]
    del obj[last]
    return body


@pytest.mark.parametrize("body,message", [
    ({**webhook(), "version": "3"}, 'expected Alertmanager webhook version "4"'),
    (_without("groupKey"), "groupKey: missing"),
    ({**webhook(), "status": "ok"}, "status: must be firing or resolved"),
    ({**webhook(), "alerts": {}}, "alerts: missing or not a list"),
    (_without("alerts.0.fingerprint"), r"alerts\[0\].fingerprint: missing"),
    (_without("alerts.0.startsAt"), r"alerts\[0\].startsAt: missing"),
    (webhook({**alert(), "labels": {"broker": 3}}), r"alerts\[0\].labels: must be an object"),
    (webhook({**alert(), "endsAt": "soon"}), r"alerts\[0\].endsAt: not an RFC 3339 time"),
    ("{nope", "not JSON"),
])
def test_a_bad_payload_names_the_field(body: Any, message: str) -> None:
    with pytest.raises(AlertPayloadError, match=message):
        parse_webhook(body)


def _stored(store: ActionStore, record: dict[str, Any], state: State | None = None) -> str:
    aid = store.propose(parse_action(record)).row.id
    if state is not None:
        store.transition(aid, state, "policy", "test")
    return aid


def test_an_offline_dir_alert_links_to_the_fix_for_that_broker_and_dir(store: ActionStore) -> None:
    other_dir = _stored(store, fix_offline("x", broker=3, log_dir="/data/d1"))
    other_broker = _stored(store, fix_offline("y", broker=2, log_dir="/data/d2"))
    fix = _stored(store, fix_offline("z", broker=3, log_dir="/data/d2/"), State.AWAITING_APPROVAL)
    page = _stored(store, of_type("page_operator", seed="p"))  # broker 3, /data/d2 too
    received = receive(store, parse_webhook(webhook(alert(log_dir='"/data/d2"'))))
    assert [r.action_id for r in received] == [fix]
    assert store.alerts(fix)[0].fingerprint == "f1"
    assert {other_dir, other_broker, page}.isdisjoint({received[0].action_id})


def test_a_page_is_linked_when_there_is_no_fix(store: ActionStore) -> None:
    page = _stored(store, of_type("page_operator", seed="p"))
    hook = parse_webhook(webhook(alert(name="KafkaOfflineReplicas", log_dir=None)))
    assert receive(store, hook)[0].action_id == page


def test_closed_actions_and_other_alerts_are_not_linked(store: ActionStore) -> None:
    done = _stored(store, fix_offline("d"), State.AWAITING_APPROVAL)
    store.transition(done, State.CANCELLED, "alice", "fixed by hand")
    hook = parse_webhook(webhook(alert(), alert(name="KafkaBrokerDown", fingerprint="f2"),
                                 alert(broker="all", fingerprint="f3")))
    assert [r.action_id for r in receive(store, hook)] == [None, None, None]


def test_a_repeated_notification_is_handled_once(store: ActionStore) -> None:
    fix = _stored(store, fix_offline())
    body = webhook(alert())
    assert [(r.new, r.action_id) for r in receive(store, parse_webhook(body))] == [(True, fix)]
    assert [(r.new, r.action_id) for r in receive(store, parse_webhook(body))] == [(False, fix)]
    resolved = copy.deepcopy(body)
    resolved["alerts"][0]["status"] = "resolved"
    assert receive(store, parse_webhook(resolved))[0].new  # a new status is news
    assert len(store.alerts()) == 2


def test_an_untriggered_fix_links_by_its_summary_brokers() -> None:
    record = fix_offline(trigger={"kind": "snapshot", "broker": None, "log_dir": None})
    row = ActionStore(":memory:").propose(parse_action(record)).row
    hook = parse_webhook(webhook(alert(broker="4", log_dir=None)))
    assert link_alert(hook.alerts[0], [row]) == row
    triggered = ActionStore(":memory:").propose(parse_action(fix_offline())).row
    assert link_alert(hook.alerts[0], [triggered]) is None  # 4 is where the fix copies to


def test_cluster_label_must_match_when_present(store: ActionStore) -> None:
    _stored(store, fix_offline())
    body = webhook(alert())
    body["alerts"][0]["labels"]["cluster_id"] = "c2"
    assert receive(store, parse_webhook(body))[0].action_id is None  # the fix is for c1


def test_an_alert_that_fired_before_its_action_is_linked_on_the_repeat(
        store: ActionStore) -> None:
    body = webhook(alert())
    assert receive(store, parse_webhook(body))[0].action_id is None
    fix = _stored(store, fix_offline())
    again = receive(store, parse_webhook(body))[0]
    assert (again.new, again.action_id) == (False, fix)
    assert [a.action_id for a in store.alerts()] == [fix]


def test_a_stored_alert_keeps_what_the_page_shows(store: ActionStore) -> None:
    fix = _stored(store, fix_offline())
    body = webhook(alert())
    body["alerts"][0]["annotations"] = {"summary": "log dir offline on broker 3"}
    receive(store, parse_webhook(body))
    (row,) = store.alerts(fix)
    shown = stored_alert(row)
    assert shown.annotations == {"summary": "log dir offline on broker 3"}
    assert shown.labels["alertname"] == "KafkaLogDirOffline"
    assert shown.starts_at == parse_webhook(body).alerts[0].starts_at
