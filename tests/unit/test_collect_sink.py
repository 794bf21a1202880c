"""The collectors' producer wrapper refuses an oversized record with the limits to raise."""

from __future__ import annotations

import pytest

from core.bus import MAX_MESSAGE_BYTES
from core.config import load
from streams.collect.sink import RecordSink, RecordTooLarge
from streams.collect.telemetry import Telemetry


def test_a_record_over_the_size_limit_says_which_limits_to_raise(tmp_path):
    # librdkafka checks the size before any connection: no bus is needed to see it
    config = load(env={"SELFHEAL_SANDBOX_DIR": str(tmp_path),
                       "SELFHEAL_CLUSTER_BOOTSTRAP_SERVERS": "127.0.0.1:9"})
    sink = RecordSink(config, Telemetry("test"), lambda _line: None, "test")
    with pytest.raises(RecordTooLarge, match="raise core.bus.MAX_MESSAGE_BYTES"):
        sink.send("selfheal.cluster-snapshots", b"x" * (MAX_MESSAGE_BYTES + 1), b"c1")
