"""How the job tells a query that failed on its own from one stopped by a signal.

A query failing in its stream thread (the fault a full run met once: a snapshot topic
listed without its partitions gave Spark an empty `startingOffsets`) cannot be brought
about on demand without the bug, so these queries are stand-ins; the real Spark start
failure is tests/integration/test_clean_stops.py's."""

from __future__ import annotations

import threading

import pytest
from pyspark.errors import PySparkException, StreamingQueryException

from streams.job import DRIVER_GONE, await_query, spark_reason


class Query:
    """Active for ``polls`` waits, then ends: with ``raises`` from `awaitTermination`
    (as pyspark does for a failed query), or with ``failure`` from `exception()`."""

    def __init__(self, polls: int, raises: Exception | None = None,
                 failure: Exception | None = None) -> None:
        self.polls, self.raises, self.failure = polls, raises, failure

    @property
    def isActive(self) -> bool:
        return self.polls > 0

    def awaitTermination(self, _timeout: float) -> None:
        self.polls -= 1
        if self.polls == 0 and self.raises is not None:
            raise self.raises

    def exception(self) -> Exception | None:
        return self.failure


def failure(text: str) -> StreamingQueryException:
    return StreamingQueryException(message=text)


def test_a_query_that_fails_in_its_thread_is_answered_with_its_failure():
    broke = failure("[STREAM_FAILED] assertion failed: you must specify all partitions")
    assert await_query(Query(3, raises=broke), threading.Event()) is broke


def test_a_query_that_ended_is_answered_with_what_it_records():
    broke = failure("ended")
    assert await_query(Query(2, failure=broke), threading.Event()) is broke
    assert await_query(Query(2), threading.Event()) is None


def test_an_error_under_a_stop_signal_is_the_driver_going_away():
    stop = threading.Event()

    class Gone(Query):
        def awaitTermination(self, _timeout: float) -> None:
            stop.set()  # the signal arrives; the driver dies under the wait
            raise ConnectionError("Py4J: answer from Java side is empty")

    assert await_query(Gone(5), stop) is DRIVER_GONE


def test_any_other_error_without_a_signal_is_raised():
    class Broken(Query):
        def awaitTermination(self, _timeout: float) -> None:
            raise ConnectionError("Py4J: answer from Java side is empty")

    with pytest.raises(ConnectionError):
        await_query(Broken(5), threading.Event())


@pytest.mark.parametrize(("text", "reason"), [
    ("[X] one.\nwhy two\n\nthree\nfour", "[X] one. | why two | three"),
    ("[X] the cause\n\nJVM stacktrace:\norg.apache.Foo\n\tat Bar", "[X] the cause"),
    ("", "PySparkException"),
    # The batch body's own failure, through Py4J (its traceback as run J's job logged it)
    ("[STREAM_FAILED] Query [id = 85b2] terminated with exception: "
     "[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function "
     "in foreach batch sink. Reason: An exception was raised by the Python Proxy. Return "
     "Message: Traceback (most recent call last):\n"
     '  File "/x/py4j/clientserver.py", line 644, in _call_proxy\n'
     "    return_value = getattr(self.pool[obj_id], method)(*params)\n"
     "py4j.protocol.Py4JJavaError: An error occurred while calling o1.collect.\n"
     "  File \"/x/streams/sink.py\", line 89, in _write\n"
     "RuntimeError: batch 14: 1 record(s) not delivered to the bus (st.actions: "
     "Broker: Unknown topic or partition)\n\nJVM stacktrace:\norg.apache.Foo",
     "the batch body raised RuntimeError: batch 14: 1 record(s) not delivered to the bus "
     "(st.actions: Broker: Unknown topic or partition)"),
    # A Spark job the body ran failed (run J: an executor's fetch during a bus outage)
    ("[STREAM_FAILED] Query [id = 85b2] terminated with exception: ... Return Message: "
     "Traceback (most recent call last):\n"
     '  File "/x/streams/sink.py", line 50, in _write\n'
     "py4j.protocol.Py4JJavaError: An error occurred while calling o9.collectToPython.\n"
     ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 failed\n"
     "\tat org.apache.spark.Foo(Foo.scala:1)\n"
     "Caused by: org.apache.kafka.common.errors.TimeoutException: Timeout of 15000ms "
     "expired before the position for partition c.broker-metrics-3 could be determined\n",
     "the batch body raised Py4JJavaError: An error occurred while calling "
     "o9.collectToPython. (Caused by: org.apache.kafka.common.errors.TimeoutException: "
     "Timeout of 15000ms expired before the position for partition c.broker-metrics-3 "
     "could be determined)"),
])
def test_the_reason_is_spark_s_own_lines_without_the_jvm_trace(text, reason):
    assert spark_reason(PySparkException(message=text)) == reason


def test_a_failed_query_starts_again_after_a_growing_wait_until_the_limit():
    from streams.job import Restarts

    restarts = Restarts(limit=5)
    assert [restarts.next_delay(1.0) for _ in range(6)] == [5.0, 10.0, 20.0, 40.0, 60.0, None]
    assert restarts.done == 5


def test_a_query_that_ran_ten_minutes_counts_its_restarts_afresh():
    from streams.job import RESTART_RESET_AFTER_S, Restarts

    restarts = Restarts(limit=2)
    assert restarts.next_delay(30.0) == 5.0
    assert restarts.next_delay(30.0) == 10.0
    assert restarts.next_delay(30.0) is None
    assert restarts.next_delay(RESTART_RESET_AFTER_S) == 5.0  # healthy since: a new series
    assert Restarts(limit=0).next_delay(RESTART_RESET_AFTER_S) is None  # 0: none at all


def test_a_restart_waits_for_the_bus_to_answer_for_every_input_topic():
    from core.bus import BusError
    from core.config import load
    from streams.job import wait_for_bus

    config = load(None, env={})
    asked: list[str] = []
    away = {"left": 3}

    def probe(topic: str) -> None:
        asked.append(topic)
        if topic.endswith("logdir-events") and away["left"] > 0:
            away["left"] -= 1
            raise BusError(f"topic {topic} not readable on the bus after 10 s: "
                           "Local: Broker transport failure")

    said: list[str] = []
    assert wait_for_bus(config, threading.Event(), said.append, probe) is True
    assert away["left"] == 0  # asked until it answered
    assert asked[-3:] == [config.topic(t) for t in ("broker-metrics", "logdir-events",
                                                     "cluster-snapshots")]
    assert len(said) == 1 and said[0].startswith("waiting for the bus (0 s so far): ")
    assert "Broker transport failure" in said[0]


def test_a_stop_while_the_bus_is_away_ends_the_wait():
    from core.bus import BusError
    from core.config import load
    from streams.job import wait_for_bus

    stop = threading.Event()

    def probe(topic: str) -> None:
        stop.set()  # SIGTERM while the bus is away
        raise BusError(f"{topic}: away")

    assert wait_for_bus(load(None, env={}), stop, lambda _: None, probe) is False
