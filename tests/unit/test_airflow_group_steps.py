"""selfheal_consumer_rebalance's steps without a cluster: a classic group reading across
racks gets one signed `assign_consumers` (a KIP-848 group beside it none), a dry run
submits nothing, and the run ends by the worst of its groups' outcomes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.signing import ActionSigner
from schemas.records import Action
from tests.unit.plan_snapshots import model
from tests.unit.test_consumer_groups_kip848 import _document

KEY = "k" * 32


@pytest.fixture
def dag_steps(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(Path(__file__).parents[2] / "airflow" / "dags"))
    from selfheal_dag_support import group_steps, steps
    from selfheal_dag_support.targets import Targets

    monkeypatch.setattr(steps, "run_folder", lambda: tmp_path)
    monkeypatch.setattr(steps, "_targets", lambda: Targets(
        "127.0.0.1:1", "c1", "http://127.0.0.1:1", "token", KEY, {}))
    return group_steps, steps


def _both() -> dict:
    """The classic group g (members on r1 and r2 given each other's partitions) and a
    KIP-848 group k reading the same topic."""
    document = _document(racks_known=True, protocol="classic")
    kip848 = json.loads(json.dumps(document["consumer_groups"][0]))
    kip848.update(group="k", group_protocol="consumer")
    document["consumer_groups"].append(kip848)
    return document


def test_a_classic_group_reading_across_racks_gets_one_signed_assign_consumers(
        dag_steps, monkeypatch, tmp_path):
    group_steps, steps = dag_steps
    monkeypatch.setattr(steps, "model_of", lambda snap: model(_both()))
    out = group_steps.plan_consumer_groups({}, {"groups": ["g", "k"], "threshold": 1.1})

    found = out["groups"]["g"]
    assert (found["cross_rack_now"], found["cross_rack_planned"]) == (4, 0)
    assert found["locality_now"] < found["locality_planned"] and found["would_apply"]
    assert "group.consumer.assignors" in out["groups"]["k"]["skipped"]
    (action,) = out["actions"]
    assert action["group"] == "g" and action["type"] == "assign_consumers"
    record = Action.from_json(Path(action["action_path"]).read_bytes())
    ActionSigner(KEY).verify(record)  # serve's check of the DAG's signature
    assert record.plan["group"] == "g" and record.trigger.kind == "schedule"
    assert record.action_id == action["action_id"]
    assert sorted(json.loads((tmp_path / "consumer-plans.json").read_text())) == ["g"]


def test_a_group_between_generations_is_not_judged(dag_steps, monkeypatch):
    group_steps, steps = dag_steps
    document = _both()
    document["consumer_groups"][0]["state"] = "PreparingRebalance"
    monkeypatch.setattr(steps, "model_of", lambda snap: model(document))
    out = group_steps.plan_consumer_groups({}, {"groups": ["g"], "threshold": 1.1})
    assert "rebalancing (state PreparingRebalance)" in out["groups"]["g"]["skipped"]
    assert out["actions"] == []


def test_a_group_within_the_threshold_gets_no_action(dag_steps, monkeypatch):
    group_steps, steps = dag_steps
    monkeypatch.setattr(steps, "model_of", lambda snap: model(_both()))
    # 4 of 4 partitions cross-rack is not above (3.0 - 1) x 4
    out = group_steps.plan_consumer_groups({}, {"groups": ["g"], "threshold": 3.0})
    assert out["groups"]["g"]["would_apply"] is False
    assert out["actions"] == [] and "no opted-in group" in out["nothing"]


def test_a_dry_run_submits_nothing_and_says_what_it_would(dag_steps, monkeypatch):
    group_steps, steps = dag_steps
    monkeypatch.setattr(steps, "model_of", lambda snap: model(_both()))
    planned = group_steps.plan_consumer_groups({}, {"groups": ["g"], "threshold": 1.1})
    said: list[str] = []
    monkeypatch.setattr(steps, "say", said.append)
    # the serve address in the targets answers nobody: a submit would raise
    submitted = group_steps.submit_groups(planned, {"dry_run": True})
    assert submitted == [{"action_id": None, "outcome": "dry run", "why": "dry_run is set",
                          "group": "g"}]
    assert said[0].startswith("dry run: would submit assign_consumers")
    done, outcomes = group_steps.poke_groups(submitted)
    assert done and outcomes[0]["outcome"] == "dry run"


def test_the_run_ends_by_the_worst_outcome_of_its_groups(dag_steps, monkeypatch):
    from airflow.sdk.exceptions import AirflowFailException

    group_steps, steps = dag_steps
    monkeypatch.setattr(steps, "_context", lambda: {})
    planned = {"groups": {"a": {"partitions": 3}, "b": {"partitions": 2}}}
    good = {"group": "a", "state": "succeeded", "action_id": "a" * 64, "reason": "published"}
    bad = {"group": "b", "state": "cancelled", "action_id": "b" * 64, "reason": "no"}
    summary = group_steps.report_consumers(planned, [good])
    assert summary["outcome"] == "succeeded" and summary["partitions"] == 3
    assert summary["groups"]["a"]["action"]["state"] == "succeeded"
    with pytest.raises(AirflowFailException, match=f"action {'b' * 12} ended cancelled"):
        group_steps.report_consumers(planned, [good, bad])
