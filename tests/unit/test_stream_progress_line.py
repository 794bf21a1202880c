"""The job's one line per micro-batch, and where a slow batch's time went."""

from collections import Counter

from streams.metrics import SLOW_BATCH_S, BatchOutput, progress_line


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
