"""The detection job on a real Spark cluster: a standalone master and worker from pyspark's
own distribution (`sandbox.spark_cluster`), the loop's collectors and `selfheal stream
--master spark://...` (`sandbox.loop`), a real dir failure on the sandbox, and the fix read
back from the bus as in local mode (`tests.e2e.loop_support`).

Then it proves the work ran on the cluster: the master lists the job as a running
application holding the worker's core, the executor JVM is the worker's child, and the
executor's own log shows its tasks (the bus read and the JVM's prescreen); the detector's
state is the driver's, per batch in the checkpoint (streams/batch_state.py). Everything
is stopped by PID and checked gone.
"""

from __future__ import annotations

import uuid

import pytest

from sandbox import cluster, loop, spark_cluster, traffic
from tests.e2e.loop_support import (
    dir_holding,
    drop_topics,
    fail_and_wait_for_fix,
    parsed,
    wait_for_batches,
)
from tests.integration.collect_support import TopicReader, snapshots

pytestmark = pytest.mark.integration

APP = "selfheal-stream"


def wait_for_snapshot_placing(reader: TopicReader, cluster_id: str, topic: str, broker: int,
                              path: str, timeout: float = 90.0) -> None:
    """Until the snapshot collector has published a snapshot that puts a replica of the
    fresh ``topic`` on ``broker``'s ``path``. A dir that fails before any snapshot saw a
    replica there lists no replicas, so the fix could not name that replica (a first run
    failed so: the page named only the bus topics' partitions)."""
    def placed(msgs):
        return any(snap.get("cluster_id") == cluster_id and any(
            p["topic"] == topic and any(r["broker"] == broker and r.get("log_dir") == path
                                        for r in p["replicas"])
            for p in snap["partitions"]) for snap in parsed(snapshots(msgs), "cluster-snapshot"))

    reader.wait_for(placed, timeout,
                    what=f"a snapshot placing {topic} on broker {broker}'s {path}")


def test_a_failed_dir_is_fixed_by_the_job_running_on_a_standalone_cluster(
        sandbox, tmp_path_factory, record_property):
    spark = spark_cluster.start(tmp_path_factory.mktemp("spark-standalone"))
    the_loop = None
    readers: dict[str, TopicReader] = {}
    prefix = f"spk{uuid.uuid4().hex[:6]}."
    work = tmp_path_factory.mktemp("spark-standalone-loop")
    try:
        assert spark.master_json()["aliveworkers"] == 1
        the_loop = loop.start(
            sandbox, work,
            names=("collect-metrics", "collect-zk", "collect-snapshots", "stream"),
            overrides={
                "bus": {"topic_prefix": prefix},
                "collect": {"snapshot_interval_seconds": 5.0},
                # The executor's first batch took about a minute here (when its Python
                # workers started and imported GX on a loaded 2-core machine; the cluster's
                # cold start is still slow on the shared box): a dozen snapshots pile
                # up, and at the default 4 a batch the job trailed the snapshot stream for
                # minutes. A fault then was planned, once the 15 s wait ran out on the
                # other sources' event time, from a snapshot older than the test's topic
                # (a page naming only the bus topics). The detector now waits for a source
                # that is behind, up to four waits (60 s); the cold start's backlog took
                # longer to drain than that, so here the job reads every snapshot there is.
                "stream": {"max_snapshots_per_trigger": 1000},
                # Only the dir failure is under test here.
                "detect": {"leader_window_seconds": 86400.0, "skew_window_seconds": 86400.0},
            },
            args={"stream": ["--master", spark.master_url]})
        # A cold start on the cluster is slow on the shared box: the app registers, the
        # worker launches the executor JVM, then the first batch. A run (with Python
        # workers on the executor, since removed) waited 240 s and the first batch ended
        # 3 s after that.
        wait_for_batches(the_loop, 0, timeout=600.0)
        for name in ("actions", "logdir-events", "cluster-snapshots"):
            readers[name] = TopicReader(sandbox, prefix + name)
            readers[name].start()

        topic = f"spark-standalone-{uuid.uuid4().hex[:6]}"
        traffic.create_topic(sandbox, topic, partitions=6, replication_factor=2)
        traffic.produce(sandbox, topic, 60)
        broker = 1
        path = dir_holding(sandbox, broker, topic)
        wait_for_snapshot_placing(readers["cluster-snapshots"], sandbox.cluster_id, topic,
                                  broker, path)
        try:
            fix, latency = fail_and_wait_for_fix(sandbox, the_loop, readers, broker, path,
                                                 topic, fix_timeout=120.0)
            record_property("figures", {"what": "standalone Spark",
                                        "log-dir event -> fix on the bus s": latency})
            assert fix["plan"]["partitions"], "an RF 2 topic on 3 brokers has room to move"
        finally:
            if cluster.disk_failed(path):
                cluster.heal_disk(sandbox, broker, path)
                sandbox.reload()

        # The job is the cluster's application, holding the worker's core.
        (app,) = [a for a in spark.master_json()["activeapps"] if a["name"] == APP]
        assert app["state"] == "RUNNING" and app["cores"] == spark_cluster.WORKER_CORES, app
        # Its executor is the worker's child, and its log shows the tasks it ran.
        executors = spark.executor_pids()
        assert len(executors) == 1, spark.worker_json()
        (executor,) = executors
        assert app["id"] in spark_cluster.cmdline(executor)
        (log,) = [p for p in spark.executor_logs() if p.parent.parent.name == app["id"]]
        text = log.read_text(errors="replace")
        assert "Finished task" in text, f"{log} shows no finished task"
        # The detector's state: the driver's, kept per batch beside Spark's offset log.
        assert list(work.glob("checkpoints/**/detect/detector/*.json")), (
            "no detector state in the job's checkpoint")
    finally:
        for reader in readers.values():
            reader.stop()
        try:
            if the_loop is not None:
                the_loop.stop_all()
            drop_topics(sandbox, prefix)
        finally:
            spark.stop()
    assert the_loop is not None
    assert not any(piece.running() for piece in the_loop.pieces.values())
    assert spark.alive() == [], "Spark processes outlived stop()"
