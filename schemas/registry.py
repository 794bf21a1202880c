"""Every wire record's JSON Schema, loaded once, and the one way to validate a record.

The schema files next to this module are the source of truth; the dataclasses in
`schemas.records` and the Spark types from `schemas.spark` are derived from them and held
together by unit tests. A schema's name is its file name without `.schema.json`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
    from jsonschema.exceptions import ValidationError  # type: ignore[import-untyped]

# jsonschema is imported on the first validation, not with this module: core.config reads
# the topic table from here, and every `selfheal` command (a plan, --help) would otherwise
# pay its ~0.1 s of imports.

SCHEMA_DIR = Path(__file__).parent
SUFFIX = ".schema.json"
DEFAULT_PREFIX = "selfheal."

# Topic suffix -> schema name. The cluster-snapshot schema is owned by schemas/snapshot.py
# and joins the table only when its file is there.
TOPICS: dict[str, str] = {
    "broker-metrics": "broker-metric",
    "logdir-events": "logdir-event",
    "cluster-snapshots": "cluster-snapshot",
    "actions": "action",
    "action-status": "action-status",
    "consumer-assignments": "consumer-assignment",
    "dead-letter": "dead-letter",
}

# RFC 3339 demands the offset; fromisoformat alone would accept a naive time, which makes
# event-time windows silently depend on the reader's time zone.
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


class RecordError(ValueError):
    """A record that is not JSON or breaks its schema; ``path`` is the first bad field."""

    def __init__(self, schema: str, path: str, problem: str) -> None:
        super().__init__(
            f"{path}: {problem} (schema {schema}: make the producer match "
            f"schemas/{schema}{SUFFIX}, or send the record to the dead-letter topic)"
        )
        self.schema = schema
        self.path = path
        self.problem = problem


def is_rfc3339(value: object) -> bool:
    """True for an RFC 3339 date-time with an offset, e.g. ``2026-01-02T03:04:05.6Z``."""
    if not isinstance(value, str) or not _RFC3339.match(value):
        return False
    try:
        datetime.fromisoformat(value.replace("z", "Z").replace("t", "T"))
    except ValueError:  # Feb 30, hour 25
        return False
    return True


@cache
def _formats() -> Any:
    # jsonschema checks "date-time" only when rfc3339-validator is installed; we do not
    # depend on it, so the check is registered here and behaves the same everywhere.
    from jsonschema import FormatChecker

    formats = FormatChecker(formats=())
    formats.checks("date-time")(is_rfc3339)
    return formats


@cache
def _schemas() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(SCHEMA_DIR.glob(f"*{SUFFIX}")):
        out[path.name[: -len(SUFFIX)]] = json.loads(path.read_text(encoding="utf-8"))
    return out


def names() -> tuple[str, ...]:
    """Every schema name, sorted."""
    return tuple(_schemas())


def schema(name: str) -> dict[str, Any]:
    """The parsed schema ``name`` (shared: do not mutate)."""
    try:
        return _schemas()[name]
    except KeyError:
        raise KeyError(f"no schema {name!r} in {SCHEMA_DIR}; known: {', '.join(names())}") from None


def topic_schemas(prefix: str = DEFAULT_PREFIX) -> dict[str, str]:
    """Topic name (with ``prefix``) -> schema name, for the schemas that exist."""
    known = _schemas()
    return {prefix + topic: name for topic, name in TOPICS.items() if name in known}


TOPIC_SCHEMAS: dict[str, str] = topic_schemas()


def resolve(node: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    """Follow local ``#/...`` refs of ``node`` inside ``root``."""
    while "$ref" in node:
        ref = node["$ref"]
        if not ref.startswith("#/"):
            raise ValueError(f"only local $refs are supported, got {ref!r}")
        target: Any = root
        for part in ref[2:].split("/"):
            target = target[part]
        node = target
    return node


def json_types(node: Mapping[str, Any]) -> list[str]:
    """The node's JSON types, null included; inferred from const or enum when untyped."""
    declared = node.get("type")
    if declared is not None:
        return [declared] if isinstance(declared, str) else list(declared)
    values = [node["const"]] if "const" in node else list(node.get("enum", []))
    names = {bool: "boolean", int: "integer", float: "number", str: "string",
             type(None): "null"}
    return sorted({names.get(type(v), "object") for v in values})


@cache
def _validator(name: str) -> Draft202012Validator:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(schema(name), format_checker=_formats())


def _json_path(parts: Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "$"


def _describe(name: str, error: ValidationError) -> RecordError:
    parts = list(error.absolute_path)
    problem = error.message
    # Name the missing or unexpected field itself, not its parent object.
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = [k for k in error.validator_value if k not in error.instance]
        if missing:
            parts.append(missing[0])
            problem = "required field is missing"
    elif error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = error.schema.get("properties", {})
        extra = sorted(k for k in error.instance if k not in allowed)
        if extra:
            parts.append(extra[0])
            problem = f"unknown field; allowed: {', '.join(allowed)}"
    return RecordError(name, _json_path(parts), problem)


def validate(name: str, obj: Any) -> None:
    """Raise `RecordError` naming the first bad field of ``obj`` against schema ``name``."""
    validator = _validator(name)
    if validator.is_valid(obj):  # the common case; collecting errors costs a third more
        return
    from jsonschema.exceptions import best_match

    error = best_match(validator.iter_errors(obj))
    if error is not None:
        raise _describe(name, error)


def is_valid(name: str, obj: Any) -> bool:
    return _validator(name).is_valid(obj)


def dumps(obj: Mapping[str, Any]) -> bytes:
    """The wire form: compact UTF-8 JSON."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
