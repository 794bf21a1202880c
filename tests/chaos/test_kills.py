"""Every component killed at a bad moment and restarted, with traffic running: a fault is
still healed, each action runs exactly once, and no throttle is left behind."""

from __future__ import annotations

import signal
import time

import pytest

from sandbox import loop
from sandbox.processes import children_by_parent
from tests.chaos.chaos_support import load, scenario, shared_loop, some_dir
from tests.e2e.loop_support import stream_batches, wait_for_batches
from tests.integration.test_clean_stops import _wait_gone, java_children

pytestmark = pytest.mark.chaos

# Slow enough that the copy takes seconds: there is a "mid-reassignment" to kill into.
SLOW = ('[actions]\nfix_offline_replicas = "auto"\n[limits]\n'
        "inter_broker_throttle_bytes_per_s = 262144\n")
# what runs beside serve: the collectors that apply to the sandbox, and the job
def pieces(state) -> tuple[str, ...]:
    return tuple(n for n in loop.pieces_for(state) if n != "serve")


@pytest.fixture(scope="module")
def shared(chaos_sandbox, tmp_path_factory):
    """One loop (fixes on auto, moves throttled) through the module's kills."""
    with shared_loop(chaos_sandbox, tmp_path_factory.mktemp("kills-loop"), SLOW) as running:
        yield running


def test_serve_killed_mid_reassignment_resumes_and_runs_the_fix_once(chaos_sandbox, shared,
                                                                     tmp_path):
    with scenario(chaos_sandbox, tmp_path, "serve-kill", shared=shared) as s:
        load(chaos_sandbox, s.topic, 6)
        broker = 1
        path = some_dir(chaos_sandbox, broker, s.topic)
        try:
            start = s.fail(broker, path)
            fix = s.wait_fix(broker, path)
            aid = fix["action_id"]
            s.timings["fault -> fix proposed s"] = time.monotonic() - start
            s.wait(lambda: (a := s.api("GET", f"/actions/{aid}"))["state"] == "executing"
                   and any(e["reason"].startswith("reassignment submitted")
                           for e in a["audit"]), "the fix executing, throttled")
            assert s.loop.stop("serve", sig=signal.SIGKILL)  # mid-reassignment, mid-throttle
            s.loop.start("serve")
            done = s.wait_done(aid)
            s.timings["fault -> healed s"] = time.monotonic() - start
            assert s.executions(aid) == 1, [e["reason"] for e in done["audit"]]
            assert any("throttle removed" in e["reason"] for e in done["audit"])
            s.assert_no_throttle_left()
            s.assert_healthy()
            s.assert_proposed_once()
            s.assert_history()
        finally:
            s.heal(broker, path)


def test_the_job_and_collectors_killed_right_after_a_fault_still_heal_it_once(
        chaos_sandbox, shared, tmp_path):
    with scenario(chaos_sandbox, tmp_path, "job-kill", shared=shared) as s:
        broker = 2
        path = some_dir(chaos_sandbox, broker, s.topic)
        try:
            start = s.fail(broker, path)
            time.sleep(1.0)  # the collectors scrape, the job is on a batch
            job = s.loop.pieces["stream"].pid
            jvms = java_children(job)
            assert len(jvms) == 1, children_by_parent().get(job)  # the driver
            for name in pieces(chaos_sandbox):
                assert s.loop.stop(name, sig=signal.SIGKILL)
            # The driver JVM, in a session of its own (out of a service manager's group
            # stop), follows its job even so: its gateway exits when its stdin closes.
            _wait_gone(jvms[0])
            time.sleep(2.0)
            for name in pieces(chaos_sandbox):
                s.loop.start(name)
            s.healed_once(broker, path, start)
            # later batches (scrapes, snapshots) still report the dir: no second fix
            wait_for_batches(s.loop, stream_batches(s.loop.pieces["stream"]) + 3)
            assert len(s.fixes_for(broker, path)) == 1
            s.assert_kept()
        finally:
            s.heal(broker, path)
