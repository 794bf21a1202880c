"""The job's one line per micro-batch, and where a slow batch's time went."""

import json
from collections import Counter

from streams.metrics import SLOW_BATCH_S, BatchOutput, StreamMetrics, batch_done, progress_line


def test_a_quiet_batch_is_one_short_line():
    output = BatchOutput(actions=Counter(fix_offline_replicas=1), dead_letters=2,
                         phases={"rows": 0.4, "plan": 0.1, "send": 0.0})
    line = progress_line(3, 120, 1.25, output, fast=96,
                         spark_ms={"addBatch": 900, "latestOffset": 200})
    assert line == ("batch 3: 120 rows (96 on the fast path), 1 action "
                    "(fix_offline_replicas), 2 dead letters, 1.25 s")


def test_a_slow_batch_names_its_phases_longest_first_with_the_sinks_steps():
    output = BatchOutput(phases={"rows": 17.9, "plan": 0.42, "send": 0.05})
    spark_ms = {"triggerExecution": 19060, "addBatch": 18500, "latestOffset": 310,
                "queryPlanning": 40, "walCommit": 120}
    line = progress_line(2, 206, 19.06, output, spark_ms=spark_ms)
    head, _, where = line.partition("; slow, where it went: ")
    assert head == "batch 2: 206 rows, 0 actions, 0 dead letters, 19.06 s"
    # triggerExecution is the whole; phases under 0.1 s are left out
    assert where == ("addBatch 18.50 s (rows 17.90, plan 0.42, send 0.05), "
                     "latestOffset 0.31 s, walCommit 0.12 s")


def test_the_threshold_and_a_batch_without_sparks_phases():
    output = BatchOutput(phases={"rows": 6.0, "plan": 0.0, "send": 0.0})
    assert "slow" not in progress_line(1, 5, SLOW_BATCH_S - 0.01, output)
    line = progress_line(1, 5, SLOW_BATCH_S, output)
    assert line.endswith("; slow, where it went: the sink: rows 6.00, plan 0.00, send 0.00")
    assert progress_line(1, 5, 9.0, BatchOutput()).endswith("where it went: no phase over 0.1 s")


def test_the_fast_path_is_what_spark_read_less_what_reached_the_sink():
    # 39 rows read, 9 collected by the sink: the prescreen dropped 30 in the JVM
    assert BatchOutput(read=9).fast(39) == 30
    assert BatchOutput(read=0).fast(30) == 30
    assert BatchOutput(read=12).fast(12) == 0
    # no report from the sink for that batch: nothing is claimed for the fast path
    assert BatchOutput().fast(39) == 0


# A batch's progress as Spark 4.2 writes it (`StreamingQueryProgress.json`), taken from the
# job's query on the sandbox: one idle scrape, 39 rows on the metrics source.
SPARK_PROGRESS = json.loads("""{"id": "3b53e1d3-3302-4498-a425-0df162f6e5f9",
 "runId": "40b5b552-8411-490d-94b2-6842285047c3", "name": "selfheal-detect",
 "timestamp": "2026-11-29T14:23:24.000Z", "batchId": 8, "batchDuration": 1278,
 "numInputRows": 39, "inputRowsPerSecond": 39.0, "processedRowsPerSecond": 30.5,
 "durationMs": {"addBatch": 184, "commitOffsets": 538, "getBatch": 0, "latestOffset": 26,
                "queryPlanning": 17, "triggerExecution": 1277, "walCommit": 508},
 "stateOperators": [],
 "sources": [{"description": "KafkaV2[Subscribe[cap4a4e.broker-metrics]]",
   "startOffset": {"cap4a4e.broker-metrics": {"0": 0, "3": 273}},
   "endOffset": {"cap4a4e.broker-metrics": {"0": 0, "3": 312}},
   "latestOffset": {"cap4a4e.broker-metrics": {"0": 0, "3": 312}},
   "numInputRows": 39, "inputRowsPerSecond": 39.0, "processedRowsPerSecond": 30.5,
   "metrics": {"avgOffsetsBehindLatest": "0.0", "maxOffsetsBehindLatest": "0",
               "minOffsetsBehindLatest": "0"}}],
 "sink": {"description": "ForeachBatchSink", "numOutputRows": -1}}""")


def test_a_batchs_spark_progress_and_the_sinks_report_make_its_metrics_and_line():
    metrics = StreamMetrics()
    metrics.batch_written(8, BatchOutput(actions=Counter(page_operator=1), read=9))
    lines: list[str] = []
    batch_done(metrics, lines.append, SPARK_PROGRESS)
    value = metrics.registry.get_sample_value
    assert value("selfheal_stream_input_rows_total") == 39
    assert value("selfheal_stream_fast_path_rows_total") == 30
    assert value("selfheal_stream_input_rows_per_second") == 39.0
    assert value("selfheal_stream_batch_duration_seconds_count") == 1
    assert value("selfheal_stream_batch_duration_seconds_sum") == 1.278
    assert value("selfheal_stream_batch_phase_seconds_total", {"phase": "walCommit"}) == 0.508
    assert value("selfheal_stream_batch_phase_seconds_total",
                 {"phase": "triggerExecution"}) is None  # the whole, not a phase
    assert lines == ["batch 8: 39 rows (30 on the fast path), 1 action (page_operator), "
                     "0 dead letters, 1.28 s"]


def test_a_rate_spark_leaves_out_of_its_json_reads_as_zero():
    # Spark writes no NaN or infinite rate (a batch that took 0 ms): the key is missing
    progress = {k: v for k, v in SPARK_PROGRESS.items() if k != "processedRowsPerSecond"}
    metrics = StreamMetrics()
    batch_done(metrics, lambda line: None, progress)
    assert metrics.registry.get_sample_value(
        "selfheal_stream_processed_rows_per_second") == 0.0
