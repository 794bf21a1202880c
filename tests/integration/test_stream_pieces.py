"""A batch in two pieces (streams.query.pieces) on the real query and bus: the small
topics' Kafka ranges in the first Spark job, the metrics' in the second, each read once;
one piece when only the metrics have new records."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from core.bus import ensure_topics
from core.config import load
from sandbox import traffic
from streams import query
from tests.polling import wait_until

pytestmark = pytest.mark.integration


def test_the_small_topics_are_read_in_their_own_job_before_the_metrics(
        sandbox, local_spark, tmp_path: Path):
    prefix = f"pcs{uuid.uuid4().hex[:6]}."
    config = load(path=None, env={"SELFHEAL_SANDBOX_DIR": sandbox.work_dir,
                                  "SELFHEAL_BUS_TOPIC_PREFIX": prefix})
    ensure_topics(config)
    metrics, events = config.topic("broker-metrics"), config.topic("logdir-events")
    seen: list[dict[str, Any]] = []

    def body(frame: Any, batch_id: int) -> None:
        pieces = query.pieces(frame, metrics)
        jobs = []
        for piece in pieces:
            tasks = piece._jdf.queryExecution().toRdd().getNumPartitions()
            jobs.append((tasks, [(r.topic, r.partition, r.offset)
                                 for r in piece.collect()]))
        seen.append({"batch": batch_id, "jobs": jobs, "whole": sorted(
            (r.topic, r.partition, r.offset) for r in frame.collect())})

    # metrics that are not size samples (the prescreen keeps them) and events, nothing
    # on the snapshot topic (Spark leaves its source out of the batch's union): on the
    # bus before the query starts from the earliest offsets, so all in one batch
    traffic.produce(sandbox, metrics, 3)
    traffic.produce(sandbox, events, 2)
    options = query.JobOptions.from_config(config, checkpoint=tmp_path / "cp",
                                           trigger_seconds=1.0, starting_offsets="earliest")
    running = query.build_query(local_spark, config, options, body)
    try:
        first = wait_until(lambda: seen and seen[0], "the first batch", 120)
        (small_tasks, small), (bulk_tasks, bulk) = first["jobs"]
        assert {t for t, _, _ in small} == {events} and len(small) == 2
        assert {t for t, _, _ in bulk} == {metrics} and len(bulk) == 3
        assert sorted(small + bulk) == first["whole"]  # each record once, in one job
        # each job's tasks: its own topics' Kafka ranges, one per partition with records
        assert small_tasks == len({(t, p) for t, p, _ in small})
        assert bulk_tasks == len({(t, p) for t, p, _ in bulk})
        read = len(seen)
        traffic.produce(sandbox, metrics, 2)  # only the metrics: one piece, one job
        wait_until(lambda: any(b["whole"] for b in seen[read:]), "the metrics", 120)
        (alone,) = [b for b in seen[read:] if b["whole"]]
        assert len(alone["jobs"]) == 1
        assert {t for t, _, _ in alone["jobs"][0][1]} == {metrics}
    finally:
        running.stop()
