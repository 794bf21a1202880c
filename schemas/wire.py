"""The one boundary between bytes from outside (a Kafka value, an HTTP body) and JSON.

`decode` is total: it returns a decoded JSON value or raises `RecordError`, never anything
else, whatever the bytes are. It bounds what a record may cost before any other code sees
it: a size limit per record type (checked before parsing), a nesting-depth limit (checked
right after, without recursion), tombstones (a null Kafka value) and text that is not
UTF-8 or not JSON are all refusals with a reason, so a consumer dead-letters the record
and moves its offset on instead of stopping. `record` adds the record type's schema.
"""

from __future__ import annotations

from typing import Any

import msgspec

from schemas.registry import RecordError, validate

# Deeper than any record we write (a snapshot nests 5 levels, an action 6).
MAX_DEPTH = 32

# Bytes per record type: a few times what the product writes, far below what would hurt.
# Snapshots of big clusters cross the bus in chunks; a whole one must still fit the bus's
# 64 MiB message limit.
MAX_BYTES: dict[str, int] = {
    "broker-metric": 64 << 10,
    "logdir-event": 64 << 10,
    "cluster-snapshot": 64 << 20,
    # A chunk of a snapshot (schemas/snapshot_chunks.py): the collector writes 4 MiB.
    "cluster-snapshot-chunk": 8 << 20,
    "cluster-snapshot-manifest": 1 << 20,
    # A failure's delta (schemas/snapshot_delta.py): a few brokers and their partitions.
    "cluster-snapshot-delta": 8 << 20,
    "action": 16 << 20,
    "action-status": 1 << 20,
    "consumer-assignment": 16 << 20,
    "dead-letter": 1 << 20,
}
DEFAULT_MAX_BYTES = 1 << 20


def limit(schema: str) -> int:
    """The most bytes one record of ``schema`` may have."""
    return MAX_BYTES.get(schema, DEFAULT_MAX_BYTES)


def decode(schema: str, raw: bytes | bytearray | memoryview | str | None,
           max_bytes: int | None = None) -> Any:
    """Decode one JSON value of a ``schema`` record; `RecordError` (at ``$``) when it is
    a tombstone, too big, not UTF-8, not JSON or nested deeper than `MAX_DEPTH`."""
    if raw is None:
        raise RecordError(schema, "$", "no value (a tombstone); every record must be a JSON "
                                       "object")
    if isinstance(raw, str):
        try:
            data = raw.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise RecordError(schema, "$", f"not UTF-8 text: {exc.reason}") from None
    else:
        data = bytes(raw)
    cap = limit(schema) if max_bytes is None else max_bytes
    if len(data) > cap:
        raise RecordError(schema, "$", f"{len(data)} bytes, over the {cap}-byte limit for "
                                       f"{schema} records")
    try:
        value = msgspec.json.decode(data)
    except UnicodeDecodeError as exc:
        raise RecordError(schema, "$", f"not UTF-8 text: {exc.reason} at byte {exc.start}"
                          ) from None
    except msgspec.DecodeError as exc:
        try:  # only on failure: say "not UTF-8" where that is the cause
            data.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise RecordError(schema, "$", f"not UTF-8 text: {bad.reason} at byte "
                                           f"{bad.start}") from None
        raise RecordError(schema, "$", f"not JSON: {exc}") from None
    except RecursionError:
        raise RecordError(schema, "$", f"nested deeper than {MAX_DEPTH} levels") from None
    deepest = depth(value, MAX_DEPTH)
    if deepest > MAX_DEPTH:
        raise RecordError(schema, "$", f"nested deeper than {MAX_DEPTH} levels")
    return value


def depth(value: Any, stop: int = MAX_DEPTH) -> int:
    """How deep ``value`` nests (a scalar is 0, ``[]`` is 1), looking no deeper than
    ``stop`` + 1; iterative, so no input can exhaust the stack."""
    deepest = 0
    todo: list[tuple[Any, int]] = [(value, 0)]
    while todo:
        node, level = todo.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        level += 1
        if level > deepest:
            deepest = level
            if deepest > stop:
                return deepest
        todo.extend((child, level) for child in children
                    if isinstance(child, (dict, list)))
    return deepest


def record(schema: str, raw: bytes | bytearray | memoryview | str | None,
           max_bytes: int | None = None) -> dict[str, Any]:
    """`decode`, then the schema: a schema-valid JSON object or `RecordError` naming the
    first bad field."""
    value = decode(schema, raw, max_bytes)
    if not isinstance(value, dict):
        raise RecordError(schema, "$", f"expected a JSON object, got {_kind(value)}")
    try:
        validate(schema, value)
    except RecordError:
        raise
    except Exception as exc:  # a validator bug must not stop the consumer either
        raise RecordError(schema, "$", f"cannot be validated: {type(exc).__name__}: {exc}"
                          ) from None
    return value


def _kind(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)
