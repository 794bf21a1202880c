"""The defect as an operator met it: `selfheal stream` run on one sandbox, then on another
(`sandbox down` and `up` makes a new cluster) with the default checkpoint. It used to
resume the first cluster's offsets and die with Spark's KafkaIllegalStateException; now
each cluster and bus has a checkpoint of its own."""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path

import pytest

from core.owner import MARKER
from sandbox import cluster
from sandbox.state import SandboxState
from tests.integration.test_clean_stops import TRACE, Proc, _env

pytestmark = pytest.mark.integration


def _run_stream_once(state: SandboxState, env_extra: dict[str, str]) -> Proc:
    job = Proc(["stream"], _env(state, **env_extra))
    try:
        job.wait_line(r"\[stream\] batch \d+: ", 300)
    finally:
        code = job.stop_group()
    assert code == 0, job.text
    assert not TRACE.search(job.text), job.text
    return job


def test_a_new_cluster_gets_a_checkpoint_of_its_own_by_default(
        sandbox: SandboxState, tmp_path: Path) -> None:
    state_home = tmp_path / "state"
    env = {"XDG_STATE_HOME": str(state_home), "SELFHEAL_BUS_TOPIC_PREFIX":
           f"pc{uuid.uuid4().hex[:6]}.", "SELFHEAL_STREAM_METRICS_HTTP_PORT": "0"}
    with ThreadPoolExecutor(1) as pool:
        # the other cluster comes up while the job runs on the first: one after the
        # other, its start-up added ~15 s to the test
        coming = pool.submit(cluster.up, tmp_path / "other", brokers=1, log_dirs=1, racks=0)
        try:
            first = _run_stream_once(sandbox, env)
        except BaseException:
            with suppress(Exception):  # the job's failure is the one to report
                cluster.down(coming.result().reload())
            raise
        other = coming.result()
    try:
        second = _run_stream_once(other, env)
    finally:
        cluster.down(other.reload())

    root = state_home / "kafka-selfheal" / "checkpoints"
    markers = sorted(root.glob(f"*/*/detect/{MARKER}"))  # <cluster>/<bus id>/detect
    owners = [json.loads(m.read_text())["cluster"] for m in markers]
    folders = [m.parent.parent for m in markers]
    print("\n".join(str(f) for f in folders))
    assert sorted(owners) == sorted([sandbox.cluster_id, other.cluster_id])
    assert "KafkaIllegalStateException" not in first.text + second.text
    assert "new checkpoint" in second.text  # not the first cluster's, resumed
