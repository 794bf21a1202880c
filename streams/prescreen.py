"""The fast path: certainly-valid partition-size samples are dropped in the JVM.

Nearly all of selfheal.broker-metrics is `kafka_log_size` (one sample per partition per
scrape: 35,000 a second from a 1,000-broker cluster), which detection never reads
(snapshots carry sizes). Decoding and validating each of them in Python would need more
than this machine has, so the job drops them before Python sees them, but only those
that are certainly valid: a record must be exactly in the collectors' canonical form
(compact JSON, schema key order, times in UTC with "Z"), match the pattern below, be
valid UTF-8 and carry a real date. That pattern accepts a subset of what the schema
accepts (a unit test holds it to that on every mutation of a valid record), so nothing
invalid is dropped here; everything else, valid or not, goes on to the Great
Expectations suites, which word the reason of every rejection.
"""

from __future__ import annotations

import re
from typing import Any

from schemas.registry import is_rfc3339

_TEXT = r'[^"\\\x00-\x1f]'  # a JSON string character that needs no escape
_STRING = f'"{_TEXT}+"'  # non-empty
_UINT = r"(0|[1-9][0-9]{0,17})"  # JSON's integers: no leading zero; far below 2**63
_VALUE = r"(0|[1-9][0-9]{0,17})(\.[0-9]{1,17})?"  # >= 0, finite, no exponent
_TIME = (r'"([1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])'
         r'T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?Z)"')
_LABELS = rf'\{{({_STRING}:"{_TEXT}*"(,{_STRING}:"{_TEXT}*")*)?\}}'

# A kafka_log_size sample as streams/collect writes it (schema order, compact).
SIZE_SAMPLE = (
    r'^\{"version":1,"cluster_id":' + _STRING + r',"event_time":' + _TIME
    + r',"broker":' + _UINT + r',"rack":(null|' + _STRING + r')'
    + r',"metric":"kafka_log_size","labels":' + _LABELS + r',"value":' + _VALUE + r'\}$'
)
EVENT_TIME = r'^\{"version":1,"cluster_id":' + _STRING + r',"event_time":"([^"]+)"'

_SIZE_SAMPLE = re.compile(SIZE_SAMPLE)
_EVENT_TIME = re.compile(EVENT_TIME)


def is_fast(value: bytes | None) -> bool:
    """What `fast_path` computes in the JVM, in Python (for tests and tools)."""
    if value is None:
        return False
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    when = _EVENT_TIME.match(text)
    return bool(_SIZE_SAMPLE.match(text)) and when is not None and is_rfc3339(when.group(1))


def fast_path(metrics_topic: str) -> Any:
    """The Spark condition, on Kafka source rows: true for a record of ``metrics_topic``
    that is certainly a valid kafka_log_size sample; never null."""
    from pyspark.sql import functions as F

    text = F.col("value").cast("string")
    when = F.regexp_extract(text, EVENT_TIME, 1)
    return F.coalesce(
        (F.col("topic") == F.lit(metrics_topic)) & F.is_valid_utf8(text)
        & text.rlike(SIZE_SAMPLE) & F.try_to_timestamp(when).isNotNull(),
        F.lit(False))
