"""The steps of the selfheal DAGs: snapshot, plan, submit, wait, report.

Every step takes and returns plain JSON (XCom); big things (snapshots, plans, signed
actions) are files in the run's folder under the data dir, and XCom carries their paths.
Reads go to Kafka (DescribeCluster, Metadata, DescribeLogDirs, DescribeGroups); every
change goes through serve as a signed action, never through the Admin API.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from selfheal_dag_support.serve_api import ServeClient, ServeRefused, ServeUnreachable
from selfheal_dag_support.targets import TargetError, Targets, data_dir, resolve

log = logging.getLogger("selfheal.airflow")

# serve's final states (remediation.executor.lifecycle.TERMINAL), and what a run says;
# "refused": serve's intake refused the record, so it never became an action
# (remediation.service.refusals).
TERMINAL = ("succeeded", "failed", "cancelled", "expired", "superseded", "refused")
ENDED_BADLY = ("failed", "cancelled", "expired", "refused")


# --- plumbing -------------------------------------------------------------------------


def _context() -> Any:
    from airflow.sdk import get_current_context

    return get_current_context()


def run_folder() -> Path:
    """This run's folder: <data dir>/<dag id>/<run id>."""
    ctx = _context()
    run_id = re.sub(r"[^A-Za-z0-9_.-]+", "_", ctx["run_id"])
    folder = data_dir() / ctx["dag"].dag_id / run_id
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _targets() -> Targets:
    from airflow.sdk.exceptions import AirflowFailException

    try:
        return resolve()
    except TargetError as exc:
        raise AirflowFailException(str(exc)) from None


def _write(path: Path, doc: Any) -> str:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
    return str(path)


def say(text: str) -> None:
    """One line in the task log (each line of a multi-line text on its own)."""
    for line in text.splitlines():
        log.info("%s", line)


def _outlet(asset: Any, **extra: Any) -> None:
    """Attach ``extra`` (paths, cluster) to this task's event on ``asset``."""
    try:
        _context()["outlet_events"][asset].extra = extra
    except Exception:  # no outlet declared for this task: nothing to attach
        pass


# --- snapshot -------------------------------------------------------------------------


def snapshot(name: str, asset: Any = None, groups: list[str] | None = None) -> dict[str, Any]:
    """Read the live cluster into a snapshot file (with ``groups``' members when given)."""
    from core.live import open_admin, read_snapshot

    targets = _targets()
    say(targets.describe())
    with open_admin(targets.bootstrap_servers, client_id="selfheal-airflow",
                    security=targets.security) as admin:
        doc = read_snapshot(admin, targets.cluster_id)
        if groups:
            doc["consumer_groups"] = read_groups(admin, groups)
    path = _write(run_folder() / f"snapshot-{name}.json", doc)
    say(f"snapshot {name}: {len(doc['brokers'])} brokers, {len(doc['partitions'])} partitions "
        f"-> {path}")
    if asset is not None:
        _outlet(asset, path=path, cluster_id=targets.cluster_id, taken_at=doc["taken_at"])
    return {"path": path, "cluster_id": targets.cluster_id, "taken_at": doc["taken_at"]}


def model_of(snap: dict[str, Any]) -> Any:
    from core.model import ClusterModel

    return ClusterModel.load(snap["path"])


def read_groups(admin: Any, groups: list[str]) -> list[dict[str, Any]]:
    """Members of each group (their client.rack and topics, KIP-881 subscription v3) in the
    snapshot's `consumer_groups` format; groups with no members are left out."""
    from core.groups import read_groups as read

    return read(admin, groups)


# --- plans ----------------------------------------------------------------------------


def _sign_and_keep(targets: Targets, type_: str, plan: Any, reason: str,
                   bytes_moved: int = 0, received: Any = None,
                   name: str = "action.json") -> dict[str, Any]:
    from core import clock
    from core.signing import ActionSigner
    from schemas.actions import build_action
    from schemas.records import Receiving, Trigger

    got = None if received is None else [Receiving(r.broker, r.bytes, r.replicas)
                                         for r in received]
    action = build_action(targets.cluster_id, type_, plan, reason=reason,
                          trigger=Trigger("schedule"), event_time=clock.text(),
                          created_at=clock.text(), bytes_moved=bytes_moved, received=got)
    signed = ActionSigner(targets.signing_key).sign_action(action)
    path = run_folder() / name
    path.write_bytes(signed.to_json())
    return {"action_path": str(path), "action_id": action.action_id, "type": type_,
            "partitions": action.summary.partitions, "bytes": bytes_moved,
            "brokers": list(action.summary.brokers)}


def cap_disk_plan(model: Any, plan: Any, max_bytes: int) -> Any:
    """``plan`` with only the moves that fit in ``max_bytes`` (0: no cap), whole partitions
    at a time in the planner's order."""
    from core.plan.formats import ANY_DIR, DiskPlan, PartitionAssignment, Reassignment

    if max_bytes <= 0 or sum(m.size_bytes for m in plan.moves) <= max_bytes:
        return plan
    by_partition: dict[tuple[str, int], list[Any]] = {}
    for m in plan.moves:
        by_partition.setdefault((m.topic, m.partition), []).append(m)
    index = model.partition_index()
    kept: list[Any] = []
    spent = 0
    for key in sorted(by_partition, key=lambda k: index[k]):
        size = sum(m.size_bytes for m in by_partition[key])
        if spent + size > max_bytes:
            continue
        spent += size
        kept.extend(by_partition[key])
    assignments = []
    for key in sorted({(m.topic, m.partition) for m in kept}, key=lambda k: index[k]):
        p = model.partitions[index[key]]
        target = {m.broker: m.target for m in kept if (m.topic, m.partition) == key}
        brokers = tuple(r.broker for r in p.replicas)
        assignments.append(PartitionAssignment(p.topic, p.partition, brokers,
                                               tuple(target.get(b, ANY_DIR) for b in brokers)))
    return DiskPlan(Reassignment(tuple(assignments)), plan.skipped, tuple(kept))


def plan_disks(snap: dict[str, Any], params: dict[str, Any], asset: Any = None
               ) -> dict[str, Any]:
    """Intra-broker moves that bring every dir within threshold x its broker's mean."""
    from core.plan import disks
    from selfheal_dag_support import measures

    threshold = float(params["threshold"])
    model = model_of(snap)
    full = disks.plan_disks(model, threshold)
    plan = cap_disk_plan(model, full, int(params["max_bytes_per_run"]))
    say(disks.explain(model, plan, threshold))
    moved = sum(m.size_bytes for m in plan.moves)
    if len(plan.moves) < len(full.moves):
        say(f"max_bytes_per_run {params['max_bytes_per_run']}: {len(plan.moves)} of "
            f"{len(full.moves)} moves this run; the next run takes the rest")
    out: dict[str, Any] = {"skew_before": measures.disk_skew(model),
                           "skipped": [s.to_json() for s in plan.skipped],
                           "moves": [{"topic": m.topic, "partition": m.partition,
                                      "broker": m.broker, "from": m.source, "to": m.target,
                                      "bytes": m.size_bytes} for m in plan.moves]}
    if not plan.moves:
        out["nothing"] = (f"no broker has a log dir above {threshold:.2f}x its mean usage"
                          if not full.moves else
                          f"every move is larger than max_bytes_per_run "
                          f"({params['max_bytes_per_run']} bytes)")
        return out
    brokers = sorted({m.broker for m in plan.moves})
    reason = (f"scheduled disk rebalance: broker {', '.join(map(str, brokers))} above "
              f"{threshold:.2f}x the mean dir usage; {len(plan.moves)} replicas move")
    out.update(_sign_and_keep(_targets(), "move_replica_dirs", plan, reason, moved))
    if asset is not None:
        _outlet(asset, path=out["action_path"], action_id=out["action_id"])
    return out


def plan_leaders(snap: dict[str, Any], params: dict[str, Any], asset: Any = None
                 ) -> dict[str, Any]:
    """Replica reorders and a preferred election that even out leaders by broker and rack,
    when the busiest broker leads more than threshold x the mean."""
    from core.plan import leaders
    from core.plan.formats import LeaderPlan, Reassignment
    from selfheal_dag_support import measures

    threshold = float(params["threshold"])
    model = model_of(snap)
    before = measures.leaders(model)
    out: dict[str, Any] = {"leaders_before": before}
    counts = list(before["per_broker"].values())
    mean = sum(counts) / len(counts) if counts else 0.0
    plan = leaders.plan_leaders(model)
    limit = int(params["max_partitions_per_run"])
    if limit > 0 and len(plan.election) > limit:
        keep = set(plan.election[:limit])
        plan = LeaderPlan(Reassignment(tuple(
            a for a in plan.reassignment.partitions
            if any((tp.topic, tp.partition) == (a.topic, a.partition) for tp in keep))),
            plan.election[:limit])
        say(f"max_partitions_per_run {limit}: the first {limit} leader changes this run")
    say(leaders.explain(model, plan))
    density = list(before["per_rack_per_broker"].values())
    racks_even = not density or max(density) - min(density) <= 1
    if not plan.election:
        out["nothing"] = "leaders are as even as the replicas allow, by broker and by rack"
        return out
    if counts and max(counts) <= threshold * mean and before["broker_spread"] <= 1 \
            and racks_even:
        out["nothing"] = (f"the busiest broker leads {max(counts)}, within {threshold:.2f}x "
                          f"the mean ({mean:.1f}), and racks are even")
        return out
    reason = (f"scheduled leader rebalance: {len(plan.election)} partitions change leader to "
              "even out leaders per broker and rack")
    out.update(_sign_and_keep(_targets(), "rebalance_leaders", plan, reason))
    if asset is not None:
        _outlet(asset, path=out["action_path"], action_id=out["action_id"])
    return out


# --- submit and wait ------------------------------------------------------------------


def submit(planned: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """POST the signed action to serve; what the sensor needs to follow it."""
    from airflow.sdk.exceptions import AirflowFailException

    if "action_path" not in planned:
        say(f"nothing to do: {planned.get('nothing', 'no plan')}")
        return {"action_id": None, "outcome": "nothing to do", "why": planned.get("nothing")}
    if params.get("dry_run"):
        say(f"dry run: would submit {planned['type']} {planned['action_id'][:12]} "
            f"({planned['partitions']} partitions, {planned['bytes']} bytes); plan in "
            f"{planned['action_path']}")
        return {"action_id": None, "outcome": "dry run", "why": "dry_run is set"}
    targets = _targets()
    client = ServeClient(targets.serve_url, targets.api_token)
    action_id = planned["action_id"]
    try:
        before = client.show(action_id)  # ServeUnreachable: the task retries
        record = Path(planned["action_path"]).read_bytes()
        reply = client.submit(record)
    except ServeRefused as exc:
        raise AirflowFailException(str(exc)) from None
    except ServeUnreachable as exc:
        say(str(exc))
        raise
    say(f"submitted {planned['type']} {action_id[:12]} to serve: "
        f"{targets.serve_url}{reply.get('url', '')}")
    return {"action_id": action_id, "type": planned["type"], "serve_url": targets.serve_url,
            "page": f"{targets.serve_url}/actions/{action_id}",
            "audit_before": len(before["audit"]) if before else 0}


def poke(submitted: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """One look at the action: (finished, what the report needs)."""
    if not submitted.get("action_id"):
        return True, {"state": None, "outcome": submitted.get("outcome"),
                      "why": submitted.get("why")}
    targets = _targets()
    client = ServeClient(targets.serve_url, targets.api_token)
    action_id = submitted["action_id"]
    try:
        shown = client.show(action_id)
    except ServeUnreachable as exc:
        say(f"{exc}; looking again at the next poke")
        return False, {}
    if shown is None:
        say(f"action {action_id[:12]} is not in serve's store yet (its intake reads the "
            "actions topic)")
        return False, {}
    state = shown["state"]
    audit = shown.get("audit", [])
    fresh = audit[int(submitted.get("audit_before", 0)):]
    last = audit[-1]["reason"] if audit else ""
    progress = shown.get("progress")
    if state == "awaiting_approval":
        url = shown.get("approval_url", "")
        say(f"action {action_id[:12]} AWAITS APPROVAL: {url} (or POST "
            f"{targets.serve_url}/api/actions/{action_id}/approve); page {submitted['page']}")
        try:
            _context()["ti"].xcom_push(key="approval_url", value=url)
        except Exception:
            pass
    else:
        say(f"action {action_id[:12]}: {state}" + (f" ({progress})" if progress else "")
            + (f"; {last}" if last else ""))
    if state in TERMINAL and fresh:
        return True, {"action_id": action_id, "state": state,
                      "attempts": shown.get("attempts", 0),
                      "reason": shown["reason"] if state == "refused" else last,
                      "page": submitted["page"],
                      "audit": [f"{a['from']} -> {a['to']} by {a['actor']}: {a['reason']}"
                                for a in fresh]}
    return False, {}


# --- report ---------------------------------------------------------------------------


def finish(summary: dict[str, Any], outcome: dict[str, Any]) -> dict[str, Any]:
    """Log the summary, keep it next to the run's files, and end the run by the outcome:
    succeeded, superseded (nothing to do), nothing planned and dry runs succeed; failed,
    cancelled (rejected) and expired actions fail the run with serve's reason."""
    from airflow.sdk.exceptions import AirflowFailException

    state = outcome.get("state")
    if state == "superseded":
        summary["outcome"] = "nothing to do"
        summary["why"] = f"serve superseded the action: {outcome.get('reason')}"
    elif state is None:
        summary["outcome"] = outcome.get("outcome") or "nothing to do"
        summary["why"] = outcome.get("why")
    else:
        summary["outcome"] = state
        summary["why"] = outcome.get("reason")
    for key in ("action_id", "page", "attempts", "audit"):
        if outcome.get(key) is not None:
            summary[key] = outcome[key]
    _write(run_folder() / "report.json", summary)
    say("run summary:\n" + json.dumps(summary, indent=1, sort_keys=True))
    if state in ENDED_BADLY:
        # The summary stays in XCom and in report.json; the run fails saying why.
        try:
            _context()["ti"].xcom_push(key="summary", value=summary)
        except Exception:
            pass
        what = {"failed": "serve ran it and it failed (see the audit; serve reverted what "
                          "it started)",
                "cancelled": "it was rejected or cancelled by an operator",
                "expired": "nobody approved it before the approval link expired",
                "refused": "serve refused the record; nothing was executed"}[state]
        raise AirflowFailException(
            f"action {outcome.get('action_id', '')[:12]} ended {state}: {what}. serve says: "
            f"{outcome.get('reason')}. Page: {outcome.get('page')}")
    return summary


def report_disks(planned: dict[str, Any], outcome: dict[str, Any]) -> dict[str, Any]:
    from selfheal_dag_support import measures

    after = model_of(snapshot("after"))
    done = outcome.get("state") == "succeeded"
    summary = {
        "partitions": len({(m["topic"], m["partition"]) for m in planned.get("moves", [])})
        if done else 0,
        "bytes_moved": sum(m["bytes"] for m in planned.get("moves", [])) if done else 0,
        "moves": planned.get("moves", []) if done else [],
        "planned_moves": len(planned.get("moves", [])),
        "skew_before": planned.get("skew_before"),
        "skew_after": measures.disk_skew(after),
        "dir_bytes_after": measures.dir_bytes(after),
        "skipped": planned.get("skipped", []),
    }
    return finish(summary, outcome)


def report_leaders(planned: dict[str, Any], outcome: dict[str, Any]) -> dict[str, Any]:
    from selfheal_dag_support import measures

    after = model_of(snapshot("after"))
    done = outcome.get("state") == "succeeded"
    summary = {
        "partitions": planned.get("partitions", 0) if done else 0,
        "bytes_moved": 0,
        "leaders_before": planned.get("leaders_before"),
        "leaders_after": measures.leaders(after),
    }
    return finish(summary, outcome)
