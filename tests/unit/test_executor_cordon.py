"""The executor runs a cordon and its undo as actions: the policy lets both run by
themselves, the cordon is journalled before the config changes, and the undo lifts only a
cordon the executor made, giving the operator's value back. On a cluster whose
cordoned.log.dirs the test holds (the Admin calls are the integration test's)."""

from __future__ import annotations

from pathlib import Path

from core.signing import ActionSigner
from remediation.executor.cordon import KEY, CordonConfig, parts
from remediation.executor.lifecycle import State
from remediation.executor.policy import DEFAULT_MODES, Policy
from remediation.executor.runner import Executor
from remediation.executor.store import ActionStore
from remediation.executor.view import LiveView
from schemas.actions import build_action
from schemas.records import Action, Trigger
from tests.unit.plan_snapshots import broker, doc, model, partition

DIRS = ("/d1", "/d2", "/d3")


class Cluster:
    """Broker 1 with three dirs and a cordoned.log.dirs the test sets; its reads show it."""

    def __init__(self, dynamic: str | None = None, static: str | None = None,
                 level: int = 31) -> None:
        self.dynamic, self.static, self.level = dynamic, static, level
        self.alters: list[dict] = []

    def cordoned_dirs(self, broker_id: int) -> set[str]:
        return set(self.cordon_config(broker_id).effective) & set(DIRS)

    def read(self, future_of: object = (), topics: object = None) -> LiveView:
        dirs = [{"path": p, "online": True, **({"cordoned": True} if p in
                                                 self.cordoned_dirs(1) else {})} for p in DIRS]
        return LiveView(model(doc([broker(1, "r1", dirs), broker(2, "r2")],
                                  [partition("t", 0, [(1, "/d2", 1), (2, "/d1", 1)])])))

    @property
    def last_view(self) -> LiveView:
        return self.read()

    def cordon_config(self, broker_id: int) -> CordonConfig:
        return CordonConfig(self.dynamic, self.static)

    def metadata_level(self) -> int:
        return self.level

    def alter_configs(self, configs: dict[str, dict[str, str | None]]) -> None:
        self.alters.append(configs)
        self.dynamic = configs["broker:1"][KEY]


def cordon_action(type_: str, path: str) -> Action:
    return build_action("test", type_, {"broker": 1, "log_dir": path}, reason="test",
                        trigger=Trigger("snapshot", 1, path),
                        event_time="2026-11-22T03:00:00Z", created_at="2026-11-22T03:00:00Z")


def run(executor: Executor, action: Action) -> tuple[State, list[str]]:
    """Propose through the executor's own intake, then step until the action ends."""
    executor.receive(executor.signer.sign_action(action).to_json())
    for _ in range(4):
        executor.tick()
    row = executor.store.get(action.action_id)
    assert row is not None
    return row.state, [a.reason for a in executor.store.audit(row.id)]


def executor_on(tmp_path: Path, kafka: Cluster) -> Executor:
    return Executor(ActionStore(tmp_path / "actions.db"), kafka, Policy(),  # type: ignore[arg-type]
                    signer=ActionSigner("k"), log=lambda _m: None)


def test_a_cordon_and_its_undo_run_by_themselves_and_give_the_operators_value_back(
        tmp_path: Path) -> None:
    assert DEFAULT_MODES["cordon_log_dir"] == DEFAULT_MODES["uncordon_log_dir"] == "auto"
    kafka = Cluster(dynamic="/d3")  # an operator cordoned /d3 by hand
    executor = executor_on(tmp_path, kafka)
    cordon = cordon_action("cordon_log_dir", "/d1")
    assert cordon.summary.brokers == (1,) and cordon.summary.partitions == 0
    state, audit = run(executor, cordon)
    assert state is State.SUCCEEDED, audit
    assert parts(kafka.dynamic) == ["/d3", "/d1"]
    row = executor.store.get(cordon.action_id)
    assert row is not None and row.journal["cordon"] == {
        "broker": 1, "path": "/d1", "added": True, "dynamic_before": "/d3"}
    state, audit = run(executor, cordon_action("uncordon_log_dir", "/d1"))
    assert state is State.SUCCEEDED, audit
    assert kafka.dynamic == "/d3" and len(kafka.alters) == 2
    assert any("lifted" in a for a in audit), audit


def test_an_undo_of_an_operators_cordon_changes_nothing(tmp_path: Path) -> None:
    kafka = Cluster(static="/d1")  # cordoned in server.properties, not by selfheal
    executor = executor_on(tmp_path, kafka)
    state, audit = run(executor, cordon_action("uncordon_log_dir", "/d1"))
    assert state is State.SUCCEEDED
    assert kafka.alters == [] and kafka.dynamic is None
    assert any("nothing lifted (an operator's stays)" in a for a in audit), audit


def test_a_cordon_of_a_dir_cordoned_already_is_superseded_untouched(tmp_path: Path) -> None:
    kafka = Cluster(dynamic="/d1")
    state, audit = run(executor_on(tmp_path, kafka), cordon_action("cordon_log_dir", "/d1"))
    assert state is State.SUPERSEDED and kafka.alters == []
    assert any("cordoned already" in a for a in audit), audit


def test_a_cordon_on_a_cluster_before_metadata_version_4_3_fails_in_one_line(
        tmp_path: Path) -> None:
    kafka = Cluster(level=21)  # 3.9-IV0
    executor = executor_on(tmp_path, kafka)
    action = cordon_action("cordon_log_dir", "/d1")
    run(executor, action)
    assert kafka.alters == []
    row = executor.store.get(action.action_id)
    assert row is not None and row.state is State.FAILED
    said = [a.reason for a in executor.store.audit(row.id)]
    assert any("needs metadata.version 4.3-IV0" in a for a in said), said
