"""The snapshot walker's field specs and the checks every object goes through: each
field's JSON type, nullability and minimum as `cluster-snapshot.schema.json` says, and
the error that names the first bad field as a JSON path (schemas/snapshot.py walks the
document with them)."""

from __future__ import annotations

import json
from typing import Any

from schemas.snapshot_types import SNAPSHOT_VERSION, SnapshotError

# A field: (name, kind, required, nullable, minimum). `minimum` is a number for integers
# and a minimum length for strings.
Field = tuple[str, str, bool, bool, int | None]

TOP_FIELDS: tuple[Field, ...] = (
    ("version", "version", True, False, None),
    ("cluster_id", "str", True, False, 1),
    ("taken_at", "str", True, False, None),
    ("brokers", "list", True, False, None),
    ("partitions", "list", True, False, None),
    ("consumer_groups", "list", False, False, None),
    ("metadata_level", "int", False, True, 0),
)
BROKER_FIELDS: tuple[Field, ...] = (
    ("id", "int", True, False, 0),
    ("rack", "str", False, True, 1),
    ("alive", "bool", True, False, None),
    ("log_dirs", "list", True, False, None),
    ("replica_selector", "str", False, True, 1),
)
LOG_DIR_FIELDS: tuple[Field, ...] = (
    ("path", "str", True, False, 1),
    ("online", "bool", True, False, None),
    ("total_bytes", "int", False, True, 0),
    ("usable_bytes", "int", False, True, 0),
    ("cordoned", "bool", False, False, None),
)
PARTITION_FIELDS: tuple[Field, ...] = (
    ("topic", "str", True, False, 1),
    ("partition", "int", True, False, 0),
    ("leader", "int", True, False, -1),
    ("isr", "list", True, False, None),
    ("replicas", "list", True, False, None),
)
REPLICA_FIELDS: tuple[Field, ...] = (
    ("broker", "int", True, False, 0),
    ("log_dir", "str", False, True, 1),
    ("size_bytes", "int", True, False, 0),
)
GROUP_FIELDS: tuple[Field, ...] = (
    ("group", "str", True, False, 1),
    ("members", "list", True, False, None),
    ("protocol_type", "str", False, True, None),
    ("protocol", "str", False, True, None),
    ("state", "str", False, True, None),
    ("group_protocol", "str", False, True, 1),
    ("racks_known", "bool", False, False, None),
)
MEMBER_FIELDS: tuple[Field, ...] = (
    ("member_id", "str", True, False, 1),
    ("group_instance_id", "str", False, True, 1),
    ("client_id", "str", True, False, 0),
    ("rack", "str", False, True, 1),
    ("topics", "list", True, False, None),
    ("assignment", "list", False, False, None),
)
ASSIGNED_FIELDS: tuple[Field, ...] = (
    ("topic", "str", True, False, 1),
    ("partitions", "list", True, False, None),
)


MISSING: Any = object()


def index_of(items: list[Any], item: Any) -> int:
    return next(k for k, x in enumerate(items) if x is item)


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


def shown(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, (dict, list)) else json_type(value)
    return text if len(text) <= 40 else text[:37] + "..."


def as_int(value: Any, path: str, minimum: int | None) -> int:
    # JSON Schema's "integer" accepts 3.0; booleans are not integers.
    if type(value) is float and value.is_integer():
        value = int(value)
    if type(value) is not int:
        raise SnapshotError(path, f"expected an integer, got {shown(value)}")
    if minimum is not None and value < minimum:
        raise SnapshotError(path, f"expected an integer >= {minimum}, got {value}")
    return value


def fields(obj: Any, spec: tuple[Field, ...], path: str) -> list[Any]:
    """Check one object against its field spec; return the values in spec order."""
    if type(obj) is not dict:
        raise SnapshotError(path, f"expected an object, got {json_type(obj)}")
    values: list[Any] = []
    for name, kind, required, nullable, minimum in spec:
        where = f"{path}.{name}" if path != "$" else name
        if name not in obj:
            if required:
                raise SnapshotError(where, "required field is missing")
            values.append(None if nullable or kind != "list" else [])
            continue
        value = obj[name]
        if value is None and nullable:
            values.append(None)
        elif kind == "int":
            values.append(as_int(value, where, minimum))
        elif kind == "str":
            if type(value) is not str:
                raise SnapshotError(where, f"expected a string, got {shown(value)}")
            if minimum and len(value) < minimum:
                raise SnapshotError(where, "must not be empty")
            values.append(value)
        elif kind == "bool":
            if type(value) is not bool:
                raise SnapshotError(where, f"expected true or false, got {shown(value)}")
            values.append(value)
        elif kind == "list":
            if type(value) is not list:
                raise SnapshotError(where, f"expected an array, got {json_type(value)}")
            values.append(value)
        elif kind == "version":
            if json_type(value) != "integer" or value != SNAPSHOT_VERSION:
                raise SnapshotError(
                    where,
                    f"unsupported snapshot version {shown(value)}; this reader knows "
                    f"version {SNAPSHOT_VERSION}",
                )
            values.append(value)
    if len(obj) > sum(1 for f in spec if f[0] in obj):
        known = [f[0] for f in spec]
        extra = next(k for k in obj if k not in known)
        where = f"{path}.{extra}" if path != "$" else str(extra)
        raise SnapshotError(where, f"unknown field; expected one of {', '.join(known)}")
    return values
