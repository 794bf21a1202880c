"""The placement audit's steps: rack diversity, offline replicas and replication below
intent found in a snapshot, and the offline fix it submits through serve."""

from __future__ import annotations

from typing import Any

from selfheal_dag_support import steps


def audit_placement(snap: dict[str, Any], params: dict[str, Any], asset: Any = None
                    ) -> dict[str, Any]:
    """The placement report: rack diversity, offline replicas, RF below intent."""
    from selfheal_dag_support import measures

    model = steps.model_of(snap)
    found = measures.audit(model, int(params.get("min_replication_factor", 1)))
    path = steps._write(steps.run_folder() / "placement-report.json", found)
    steps.say(f"rack diversity (KIP-36): {len(found['rack_diversity_violations'])} partitions span "
        "fewer racks than min(RF, racks)")
    for v in found["rack_diversity_violations"][:40]:
        steps.say(f"  {v['topic']}-{v['partition']}: replicas {v['replicas']} on racks {v['racks']}"
            f" (want {v['want_racks']})")
    steps.say(f"offline replicas (dead broker or offline dir): {len(found['offline_replicas'])} "
        "partitions")
    for v in found["offline_replicas"][:40]:
        steps.say(f"  {v['topic']}-{v['partition']}: {v['offline']}")
    steps.say(f"replication below intent: {len(found['below_replication_intent'])} partitions")
    for v in found["below_replication_intent"][:40]:
        steps.say(f"  {v['topic']}-{v['partition']}: replicas {v['replicas']}, "
                  f"intent {v['intent']}")
    if asset is not None:
        steps._outlet(asset, path=path)
    return {"path": path, "counts": {k: len(v) for k, v in found.items()
                                     if isinstance(v, list) and k != "racks"}}


def plan_offline_fix(snap: dict[str, Any], params: dict[str, Any], asset: Any = None
                     ) -> dict[str, Any]:
    """The part of the audit software may fix: replicas on dead brokers or offline dirs,
    reassigned rack-aware (`fix_offline_replicas`; serve's policy decides who approves)."""
    from core.plan import offline

    model = steps.model_of(snap)
    plan = offline.plan_offline(model)
    out: dict[str, Any] = {"unrecoverable": [u.to_json() for u in plan.unrecoverable]}
    if not plan.reassignment:
        out["nothing"] = "no replica sits on a dead broker or an offline log dir"
        return out
    index = model.partition_index()
    copy = 0
    for a in plan.reassignment.partitions:
        p = model.partitions[index[(a.topic, a.partition)]]
        new = set(a.replicas) - {r.broker for r in p.replicas}
        copy += len(new) * max((r.size_bytes for r in p.replicas), default=0)
    steps.say(offline.explain(model, plan))
    cap = int(params.get("max_bytes_per_run", 0))
    if cap and copy > cap:
        out["nothing"] = (f"the fix copies {copy} bytes, more than max_bytes_per_run ({cap}); "
                          "raise it for one run or fix by hand")
        return out
    reason = (f"placement audit: {len(plan.reassignment.partitions)} partitions have replicas "
              "on a dead broker or an offline log dir")
    out.update(steps._sign_and_keep(steps._targets(), "fix_offline_replicas", plan, reason, copy,
                              offline.received(model, plan.reassignment.partitions)))
    if asset is not None:
        steps._outlet(asset, path=out["action_path"], action_id=out["action_id"])
    return out


def report_audit(audited: dict[str, Any], planned: dict[str, Any],
                 outcome: dict[str, Any]) -> dict[str, Any]:
    summary = {"report": audited["path"], "found": audited["counts"],
               "partitions": planned.get("partitions", 0)
               if outcome.get("state") == "succeeded" else 0,
               "bytes_moved": planned.get("bytes", 0)
               if outcome.get("state") == "succeeded" else 0,
               "unrecoverable": planned.get("unrecoverable", []),
               "left_to_operators": "rack-diversity violations and replication below intent "
                                    "are reported, not moved: fix with "
                                    "kafka-reassign-partitions.sh (see the report file)"}
    return steps.finish(summary, outcome)
