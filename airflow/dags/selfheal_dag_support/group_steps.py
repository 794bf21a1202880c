"""The consumer-group steps of the selfheal DAGs: which groups opted in, their KIP-881
rack-aware plans against what they consume now, one signed `assign_consumers` per group
that reads across racks, submitted and followed through serve, and the report."""

from __future__ import annotations

import re
from typing import Any

from selfheal_dag_support import steps


def opted_in_groups(params: dict[str, Any]) -> list[str]:
    """The groups to plan: the run's `groups` param, else the Airflow variable
    ``selfheal_consumer_groups`` (comma-separated)."""
    from selfheal_dag_support.targets import _variable

    groups = list(params.get("groups") or [])
    if not groups:
        groups = [g.strip() for g in (_variable("selfheal_consumer_groups") or "").split(",")
                  if g.strip()]
    return groups


def _ratio(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def plan_consumer_groups(snap: dict[str, Any], params: dict[str, Any], asset: Any = None
                         ) -> dict[str, Any]:
    """KIP-881 rack-aware targets per opted-in group, cross-rack partitions and locality
    now against planned, and a signed `assign_consumers` for each group whose plan reads
    fewer partitions across racks by more than the threshold allows. A KIP-848 group is
    reported with what an operator can set, never given an action (nothing outside the
    group steers its assignment)."""
    from core.locality import broker_assigned_text, locality, strategy_for
    from core.plan import consumers

    model = steps.model_of(snap)
    chosen = params.get("strategy") or "auto"
    groups = {g.group: g for g in model.snapshot.consumer_groups}
    wanted = opted_in_groups(params)
    out: dict[str, Any] = {"groups": {}, "opted_in": wanted, "actions": []}
    if not wanted:
        out["nothing"] = ("no group opted in: list groups in the run's `groups` param or the "
                          "Airflow variable selfheal_consumer_groups")
        steps.say(out["nothing"])
        return out
    plans = {}
    for name in wanted:
        if name not in groups:
            out["groups"][name] = {"skipped": "no members right now (or no such group)"}
            continue
        group = groups[name]
        if group.broker_assigned:  # KIP-848: nothing outside the group steers it
            out["groups"][name] = {"skipped": broker_assigned_text(group.protocol or "")}
            steps.say(f"group {name}: {out['groups'][name]['skipped']}")
            continue
        if group.state not in (None, "Stable"):  # a half-made assignment: not judged
            out["groups"][name] = {"skipped": f"the group is rebalancing (state "
                                              f"{group.state}); the next run plans it"}
            steps.say(f"group {name}: {out['groups'][name]['skipped']}")
            continue
        strategy = strategy_for(group) if chosen == "auto" else chosen
        plan = consumers.plan_consumers(model, name, strategy)
        racks = consumers.topic_racks(model, {t for m in group.members for t in m.topics})
        now = {m: [tp for tp in tps if tp.topic in racks and tp.partition in racks[tp.topic]]
               for m, tps in consumers.current_assignment(group.members).items()}
        before = consumers.cross_rack(group.members, now, racks)
        total = sum(len(v) for v in plan.assignment.values())
        steps.say(consumers.explain(model, plan))
        found = {
            "members": len(group.members),
            "racks": sorted({m.rack for m in group.members if m.rack}),
            "strategy": strategy,
            "partitions": total,
            "cross_rack_now": before,
            "cross_rack_planned": plan.cross_rack,
            "locality_now": _ratio(locality(model, group).ratio),
            "locality_planned": _ratio(locality(model, group, plan.assignment).ratio),
            "would_apply": total > 0 and before > plan.cross_rack
            and before > (float(params["threshold"]) - 1.0) * total,
        }
        out["groups"][name] = found
        plans[name] = plan.to_json()
        if not found["would_apply"]:
            continue
        reason = (f"scheduled consumer rebalance: group {name} reads {before} of {total} "
                  f"partitions from a member with no replica on its rack; the KIP-881 target "
                  f"({strategy}) reads {plan.cross_rack}. Its members apply it through the "
                  "client-side helper (RackAwareConsumer)")
        file = "action-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", name) + ".json"
        signed = steps._sign_and_keep(steps._targets(), "assign_consumers", plan, reason,
                                      name=file)
        out["actions"].append({**signed, "group": name})
    out["plans_path"] = steps._write(steps.run_folder() / "consumer-plans.json", plans)
    if not out["actions"]:
        out["nothing"] = "no opted-in group reads across racks by more than the threshold"
    if asset is not None:
        steps._outlet(asset, path=out["plans_path"], groups=sorted(plans),
                      action_ids=[a["action_id"] for a in out["actions"]])
    return out


def submit_groups(planned: dict[str, Any], params: dict[str, Any]) -> list[dict[str, Any]]:
    """Each group's signed action to serve, as `steps.submit` hands over the other DAGs'
    (a dry run, the default of this DAG, submits none and says what it would)."""
    if not planned.get("actions"):
        return [steps.submit(planned, params)]
    return [{**steps.submit(action, params), "group": action["group"]}
            for action in planned["actions"]]


def poke_groups(submitted: list[dict[str, Any]]) -> tuple[bool, list[dict[str, Any]]]:
    """One look at every group's action: finished once each one is."""
    outcomes = []
    for one in submitted:
        done, outcome = steps.poke(one)
        if not done:
            return False, []
        outcomes.append({**outcome, "group": one.get("group")})
    return True, outcomes


def _worst(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    """The one outcome the run ends by: the first that ended badly, else the first that
    succeeded, else the first (superseded, nothing to do, dry run)."""
    for pick in (lambda o: o.get("state") in steps.ENDED_BADLY,
                 lambda o: o.get("state") == "succeeded", lambda o: True):
        for o in outcomes:
            if pick(o):
                return o
    return {"state": None, "outcome": "nothing to do"}


def report_consumers(planned: dict[str, Any], outcomes: list[dict[str, Any]]
                     ) -> dict[str, Any]:
    """Each group's locality and cross-rack partitions now and planned, and what serve
    did with its action."""
    groups = planned.get("groups", {})
    for o in outcomes:
        if o.get("group") in groups:
            groups[o["group"]]["action"] = {k: o.get(k) for k in ("action_id", "state",
                                                                  "outcome", "page")}
    done = [o for o in outcomes if o.get("state") == "succeeded"]
    summary = {"groups": groups, "bytes_moved": 0, "plans": planned.get("plans_path"),
               "partitions": sum(groups[o["group"]]["partitions"] for o in done)}
    outcome = _worst(outcomes)
    if outcome.get("state") is None and "nothing" in planned:
        outcome = {"state": None, "outcome": "nothing to do", "why": planned["nothing"]}
    return steps.finish(summary, outcome)
