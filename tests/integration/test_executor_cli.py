"""`selfheal execute`: one action in the foreground, same checks, policy and lock as serve."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sandbox import traffic
from sandbox.state import SandboxState
from tests.integration.serve_harness import (
    Bench,
    bench,
    leader_tilted_topic,
    reorder_plan,
)

pytestmark = pytest.mark.integration


def execute(b: Bench, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "selfheal.cli", "execute", *args],
                          input=stdin, capture_output=True, env=b.env, timeout=180)


def test_execute_runs_one_action_after_approval_and_refuses_beside_a_serve(
        sandbox: SandboxState, tmp_path: Path) -> None:
    topic = leader_tilted_topic(sandbox, "execute", [0, 1, 2], new_leader=2)
    plan = reorder_plan(topic, [2, 0, 1])
    with bench(sandbox, tmp_path, '[actions]\nrebalance_leaders = "approve"\n') as b:
        record = tmp_path / "action.json"
        record.write_bytes(b.action("rebalance_leaders", plan, "broker 2 should lead").to_json())

        bad = execute(b, "-", stdin=b'{"version": 1}')
        assert bad.returncode == 2 and b"malformed action record" in bad.stderr

        waits = execute(b, str(record))
        assert waits.returncode == 3 and b"needs approval; run again with --approve" in \
            waits.stderr
        assert traffic.leader_of(sandbox, topic, 0) == 0

        serve = b.serve()
        held = execute(b, str(record), "--approve", "--lock-wait", "2")
        assert held.returncode == 2 and b"the executor lock is held by" in held.stderr
        assert f"pid {serve.pid}".encode() in held.stderr
        serve.stop()

        done = execute(b, str(record), "--approve", "--actor", "erin")
        assert done.returncode == 0, done.stderr.decode()
        assert done.stdout.decode().strip().endswith("succeeded")
        assert b"awaiting_approval -> approved: approved on the command line" in done.stderr
        assert traffic.leader_of(sandbox, topic, 0) == 2
        assert traffic.partitions(sandbox, topic)[0]["replica_nodes"] == [2, 0, 1]
