"""The fast path: certainly-valid partition-size samples are dropped in the JVM.

Nearly all of selfheal.broker-metrics is `kafka_log_size` (one sample per partition per
scrape: 35,000 a second from a 1,000-broker cluster), which detection never reads
(snapshots carry sizes). Decoding and validating each of them in Python would need more
than this machine has, so the job drops them before Python sees them, but only those
that are certainly valid: a record must be exactly in the collectors' canonical form
(compact JSON, schema key order, times in UTC with "Z"), match the pattern below (a
real calendar day included) and be valid UTF-8. That pattern accepts a subset of what the schema
accepts (a unit test holds it to that on every mutation of a valid record), so nothing
invalid is dropped here; everything else, valid or not, goes on to the Great
Expectations suites, which word the reason of every rejection.
"""

from __future__ import annotations

import re
from typing import Any

_TEXT = r'[^"\\\x00-\x1f]'  # a JSON string character that needs no escape
_STRING = f'"{_TEXT}+"'  # non-empty
_UINT = r"(0|[1-9][0-9]{0,17})"  # JSON's integers: no leading zero; far below 2**63
_VALUE = r"(0|[1-9][0-9]{0,17})(\.[0-9]{1,17})?"  # >= 0, finite, no exponent
# A real calendar day, leap years included, so no date parsing is needed after the match.
_DAY = (r"([1-9][0-9]{3}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])"
        r"|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))"
        r"|([1-9][0-9](0[48]|[2468][048]|[13579][26])|([2468][048]|[13579][26])00)-02-29)")
_TIME = _DAY + r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?Z"
_LABELS = rf'\{{({_STRING}:"{_TEXT}*"(,{_STRING}:"{_TEXT}*")*)?\}}'

# A kafka_log_size sample as streams/collect writes it (schema order, compact).
SIZE_SAMPLE = (
    r'^\{"version":1,"cluster_id":' + _STRING + r',"event_time":"' + _TIME + '"'
    + r',"broker":' + _UINT + r',"rack":(null|' + _STRING + r')'
    + r',"metric":"kafka_log_size","labels":' + _LABELS + r',"value":' + _VALUE
    # The very end: Java's "$" would also match before a final \r or \u2028, which JSON
    # does not allow there.
    + r'\}(?![\s\S])'
)

_SIZE_SAMPLE = re.compile(SIZE_SAMPLE)

# The two gauges detection reads, as the collectors write them: the per-dir offline gauge
# with its one non-empty log_dir label, the offline-dir count with none. Certainly valid,
# so they need no Great Expectations run (streams/signals.py): an idle batch is nearly all
# of them, and a suite run costs ~0.14 CPU s however few rows it has.
GAUGE_SAMPLE = (
    r'^\{"version":1,"cluster_id":' + _STRING + r',"event_time":"' + _TIME + '"'
    + r',"broker":' + _UINT + r',"rack":(null|' + _STRING + r')'
    + r',"metric":("kafka_log_log_directory_offline","labels":\{"log_dir":' + _STRING
    + r'\}|"kafka_log_offline_log_directory_count","labels":\{\})'
    + r',"value":' + _VALUE + r'\}(?![\s\S])'
)
_GAUGE_SAMPLE = re.compile(GAUGE_SAMPLE)


def _matches(pattern: re.Pattern[str], value: bytes | None) -> bool:
    if value is None:
        return False
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return pattern.match(text) is not None


def is_fast(value: bytes | None) -> bool:
    """What `fast_path` computes in the JVM, in Python (for tests and tools). The
    pattern uses only what Java's and Python's regular expressions read alike."""
    return _matches(_SIZE_SAMPLE, value)


def is_certain_gauge(value: bytes | None) -> bool:
    """True for a record that is certainly a valid offline-dir gauge (`GAUGE_SAMPLE`)."""
    return _matches(_GAUGE_SAMPLE, value)


def fast_path(metrics_topic: str) -> Any:
    """The Spark condition, on Kafka source rows: true for a record of ``metrics_topic``
    that is certainly a valid kafka_log_size sample; never null."""
    from pyspark.sql import functions as F

    text = F.col("value").cast("string")
    return F.coalesce(
        (F.col("topic") == F.lit(metrics_topic)) & F.is_valid_utf8(text)
        & text.rlike(SIZE_SAMPLE),
        F.lit(False))
