"""The consumer-group steps of the selfheal DAGs: which groups opted in, their KIP-881
rack-aware plans against what they consume now, and the report."""

from __future__ import annotations

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


def plan_consumer_groups(snap: dict[str, Any], params: dict[str, Any], asset: Any = None
                         ) -> dict[str, Any]:
    """KIP-881 rack-aware targets per opted-in group, and cross-rack partitions now against
    planned. Nothing is submitted: the apply path (assign_consumers through serve) comes
    with the consumer-groups issue."""
    from core.live import open_admin
    from core.locality import broker_assigned_text
    from core.plan import consumers
    from core.plan.formats import TopicPartition

    model = steps.model_of(snap)
    strategy = params.get("strategy") or "range"
    groups = {g.group: g for g in model.snapshot.consumer_groups}
    wanted = opted_in_groups(params)
    out: dict[str, Any] = {"groups": {}, "opted_in": wanted}
    if not wanted:
        out["nothing"] = ("no group opted in: list groups in the run's `groups` param or the "
                          "Airflow variable selfheal_consumer_groups")
        steps.say(out["nothing"])
        return out
    targets = steps._targets()
    plans = {}
    for name in wanted:
        if name not in groups:
            out["groups"][name] = {"skipped": "no members right now (or no such group)"}
            continue
        if groups[name].broker_assigned:  # KIP-848: nothing outside the group steers it
            out["groups"][name] = {"skipped": broker_assigned_text(groups[name].protocol or "")}
            continue
        plan = consumers.plan_consumers(model, name, strategy)
        members = groups[name].members
        racks = consumers.topic_racks(model, {t for m in members for t in m.topics})
        with open_admin(targets.bootstrap_servers, client_id="selfheal-airflow",
                        security=targets.security) as admin:
            now = steps.current_assignment(admin, name)
        now_tps = {m: [TopicPartition(t, p) for t, p in tps if t in racks and p in racks[t]]
                   for m, tps in now.items() if any(x.member_id == m for x in members)}
        before = consumers.cross_rack(members, now_tps, racks)
        total = sum(len(v) for v in plan.assignment.values())
        steps.say(consumers.explain(model, plan))
        out["groups"][name] = {
            "members": len(members),
            "racks": sorted({m.rack for m in members if m.rack}),
            "partitions": total,
            "cross_rack_now": before,
            "cross_rack_planned": plan.cross_rack,
            "would_apply": total > 0 and before > plan.cross_rack
            and before > (float(params["threshold"]) - 1.0) * total,
        }
        plans[name] = plan.to_json()
    path = steps._write(steps.run_folder() / "consumer-plans.json", plans)
    out["plans_path"] = path
    if asset is not None:
        steps._outlet(asset, path=path, groups=sorted(plans))
    return out


def report_consumers(planned: dict[str, Any]) -> dict[str, Any]:
    summary = {"groups": planned.get("groups", {}), "partitions": 0, "bytes_moved": 0,
               "note": "plans only: the apply path (assign_consumers through serve) is not "
                       "built yet"}
    if "nothing" in planned:
        return steps.finish(summary, {"outcome": "nothing to do", "why": planned["nothing"]})
    return steps.finish(summary, {"outcome": "planned", "why": planned.get("plans_path")})
