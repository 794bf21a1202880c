"""The gauges only serve knows, read from its store and scraped from its real /metrics:
the oldest approval's wait, bytes left to move, throttles in force, the breaker."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from core import clock
from remediation.executor.actions import parse_action
from remediation.executor.lifecycle import State
from remediation.executor.store import ActionStore
from remediation.service import http
from remediation.service.approvals import Approvals
from remediation.service.links import LinkSigner
from remediation.service.metrics import Counters, remediation_gauges
from tests.unit.action_records import fix_offline
from tests.unit.test_service_http import SECRET, TOKEN, Client


def _scrape(store: ActionStore) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    approvals = Approvals(store, LinkSigner(SECRET, used=store), "http://x", 3600)
    service = http.Service(store, approvals, TOKEN, Counters(), dict, lambda: ("leader", "me"))
    server, _ = http.start("127.0.0.1", 0, service)
    try:
        status, text = Client(server, store, approvals).call("GET", "/metrics")
    finally:
        server.shutdown()
        server.server_close()
    assert status == 200
    families = list(text_string_to_metric_families(text))
    assert {f.name: f.type for f in families}["selfheal_move_remaining_bytes"] == "gauge"
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in families for s in family.samples}


def test_an_idle_store_reports_nothing_waiting_moving_or_held(tmp_path: Path) -> None:
    store = ActionStore(tmp_path / "a.db")
    try:
        got = _scrape(store)
    finally:
        store.close()
    assert got[("selfheal_oldest_pending_approval_age_seconds", ())] == 0
    assert got[("selfheal_move_remaining_bytes", ())] == 0
    assert got[("selfheal_throttles_in_force", (("kind", "inter"),))] == 0
    assert got[("selfheal_throttles_in_force", (("kind", "intra"),))] == 0
    assert got[("selfheal_circuit_breaker_open", ())] == 0
    assert got[("selfheal_actions_stalled", ())] == 0


def test_waiting_executing_throttled_and_held_actions_show_on_metrics(tmp_path: Path) -> None:
    store = ActionStore(tmp_path / "a.db")
    try:
        # Waits for approval, held there by the circuit breaker.
        held = store.propose(parse_action(fix_offline("held"))).row.id
        store.transition(held, State.AWAITING_APPROVAL, "policy", "needs approval")
        store.update_journal(held, decision={"reasons": [
            "circuit breaker: 2 brokers failing at once (limit 1); nothing runs by itself "
            "until an operator looks"], "page": True})
        # Executing: 4 partitions, 8 MB planned, 1 partition left; its throttle is set.
        moving = store.propose(parse_action(fix_offline(
            "moving", partitions=4, bytes_=8_000_000))).row.id
        for state in (State.APPROVED, State.EXECUTING):
            store.transition(moving, state, "policy", "runs by itself")
        store.update_journal(moving, partitions_left=1, throttles={
            "inter": {"saved": {}, "restored": False}}, stalled={"since": "x", "bytes": 1})
        # Executing, not reported yet: all of its 1 MB is left.
        fresh = store.propose(parse_action(fix_offline("fresh"))).row.id
        for state in (State.APPROVED, State.EXECUTING):
            store.transition(fresh, state, "policy", "runs by itself")
        # Finished: its throttle was restored, its bytes are not left.
        done = store.propose(parse_action(fix_offline("done"))).row.id
        for state in (State.APPROVED, State.EXECUTING, State.VERIFYING, State.SUCCEEDED):
            store.transition(done, state, "executor", "step")
        store.update_journal(done, throttles={"intra": {"saved": {}, "restored": True}},
                             stalled={"since": "x", "bytes": 1})  # ended: not counted

        got = _scrape(store)
        waited = clock.parse(store.get(held).updated_at)  # type: ignore[union-attr]
        later = dict(((n, labels), v) for n, labels, v in
                     remediation_gauges(store, waited + timedelta(seconds=90)))
    finally:
        store.close()
    assert got[("selfheal_move_remaining_bytes", ())] == 8_000_000 / 4 + 1_000_000
    assert got[("selfheal_throttles_in_force", (("kind", "inter"),))] == 1
    assert got[("selfheal_throttles_in_force", (("kind", "intra"),))] == 0
    assert got[("selfheal_circuit_breaker_open", ())] == 1
    assert got[("selfheal_actions_stalled", ())] == 1
    assert got[("selfheal_oldest_pending_approval_age_seconds", ())] >= 0
    assert later[("selfheal_oldest_pending_approval_age_seconds", ())] == 90
