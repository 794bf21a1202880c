"""Great Expectations suites for the job's input topics, with a reason for every bad row.

One suite per input schema, derived from its JSON Schema file so the two cannot drift
(a unit test holds GX's verdict to jsonschema's). GX validates pandas frames column by
column, so each decoded record becomes one row of *checked columns*:

- ``<field>__type``: the value's JSON type ("integer", "string", ... "missing"), with
  "date-time" for a valid RFC 3339 string and "object" only for an object whose values
  have the schema's type; the suite expects it in the field's allowed set, which also
  says whether the field is required;
- ``<field>``: the value where its type is right, else null, for the range, set and
  length expectations (GX skips nulls there, so a wrong type is reported once);
- ``_unknown``: fields the schema does not allow (``additionalProperties: false``);
- ``_json``: why the value is not a JSON object at all (garbage bytes, an array), which
  is then the row's only reason.

Rules the schema cannot say are added per suite: the per-dir offline gauge must carry
a ``log_dir`` label, and a snapshot must pass the snapshot loader (schemas/snapshot.py,
which checks its deep structure and cross-references in one pass). Each expectation
carries in its ``meta`` the field and the wording of its problem, so every unexpected
row index turns into "field: problem [expectation]".

GX is imported on first use (seconds); one context per process is reused.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from schemas.registry import is_rfc3339, json_types, resolve, schema

MISSING = "missing"
DECODE = "_json"  # None, or why the value is not a JSON object
UNKNOWN = "_unknown"
LOADER = "_snapshot"  # the snapshot loader's verdict: None, or its error message
OFFLINE_GAUGE = "kafka_log_log_directory_offline"
LOG_DIR_LABEL = "labels_log_dir"

# The input topics' schemas, in the job's order.
INPUT_SCHEMAS = ("broker-metric", "logdir-event", "cluster-snapshot")


@dataclass(frozen=True, slots=True)
class FieldRule:
    """What the schema says about one top-level field."""

    name: str
    types: frozenset[str]  # allowed JSON types; "missing" when not required
    enum: tuple[Any, ...] | None = None
    minimum: float | None = None
    min_length: int | None = None
    date_time: bool = False
    value_type: str | None = None  # an object's additionalProperties type


@cache
def field_rules(name: str) -> tuple[FieldRule, ...]:
    """The top-level field rules of schema ``name``."""
    root = schema(name)
    required = set(root.get("required", ()))
    rules: list[FieldRule] = []
    for field_name, raw in root["properties"].items():
        node = resolve(raw, root)
        types = set(json_types(node))
        if "number" in types:
            types.add("integer")  # JSON Schema: every integer is a number
        if node.get("format") == "date-time":
            types = {"date-time" if t == "string" else t for t in types}
        if field_name not in required:
            types.add(MISSING)
        enum = (node["const"],) if "const" in node else node.get("enum")
        values = node.get("additionalProperties")
        rules.append(FieldRule(
            field_name,
            frozenset(types),
            tuple(enum) if enum is not None else None,
            node.get("minimum"),
            node.get("minLength"),
            node.get("format") == "date-time",
            values.get("type") if isinstance(values, Mapping) else None,
        ))
    return tuple(rules)


# --- checked columns -----------------------------------------------------------------

_TYPE_NAMES: dict[type, str] = {
    bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
    dict: "object", type(None): "null",
}


def json_type(value: Any) -> str:
    """The JSON type name of a decoded value; 3.0 is an integer, as in JSON Schema."""
    kind = _TYPE_NAMES.get(type(value), type(value).__name__)
    if kind == "number" and math.isfinite(value) and value.is_integer():
        return "integer"
    return kind


def _classify(value: Any, rule: FieldRule) -> str:
    kind = json_type(value)
    if kind == "string" and rule.date_time:
        return "date-time" if is_rfc3339(value) else "string (not an RFC 3339 date-time)"
    if kind == "object" and rule.value_type is not None:
        if not all(json_type(v) == rule.value_type for v in value.values()):
            return f"object (values must be {rule.value_type}s)"
    return kind


_SCALAR = frozenset({"integer", "number", "string", "date-time", "boolean"})


@dataclass(frozen=True, slots=True)
class NotJson:
    """A value that did not decode; stands in for its document in `checked_columns`."""

    problem: str


def _not_an_object(doc: Any) -> str | None:
    if isinstance(doc, NotJson):
        return doc.problem
    if type(doc) is not dict:
        return f"expected a JSON object, got {json_type(doc)}"
    return None


def checked_columns(name: str, docs: Sequence[Any],
                    extra: Mapping[str, Sequence[Any]] | None = None) -> dict[str, list[Any]]:
    """The columns the suite of schema ``name`` checks, one row per decoded record
    (`NotJson` for one that did not decode); ``extra`` adds precomputed columns."""
    rules = field_rules(name)
    allowed = {r.name for r in rules}
    objects = [d if type(d) is dict else {} for d in docs]
    columns: dict[str, list[Any]] = {DECODE: [_not_an_object(d) for d in docs]}
    for rule in rules:
        raw = [d.get(rule.name, _ABSENT) for d in objects]
        types = [MISSING if v is _ABSENT else _classify(v, rule) for v in raw]
        columns[f"{rule.name}__type"] = types
        keep = rule.types & _SCALAR
        columns[rule.name] = [v if t in keep else None for v, t in zip(raw, types, strict=True)]
    columns[UNKNOWN] = [
        None if d.keys() <= allowed else ", ".join(sorted(k for k in d if k not in allowed))
        for d in objects
    ]
    if name == "broker-metric":
        columns[LOG_DIR_LABEL] = [
            labels.get("log_dir") if type(labels := d.get("labels")) is dict
            and type(labels.get("log_dir")) is str and labels.get("log_dir") else None
            for d in objects
        ]
    for key, values in (extra or {}).items():
        columns[key] = list(values)
    return columns


_ABSENT: Any = object()


# --- the suites ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rule:
    """One expectation and how to word a row it rejects."""

    expectation: Any  # a great_expectations Expectation
    column: str
    word: Callable[[Any], str]  # the row's value in `column` -> "field: problem"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_problem(rule: FieldRule) -> Callable[[Any], str]:
    wanted = " or ".join(sorted(t for t in rule.types if t != MISSING))

    def word(actual: Any) -> str:
        if actual == MISSING:
            return f"{rule.name}: required field is missing"
        return f"{rule.name}: expected {wanted}, got {actual}"

    return word


def _words(text: str) -> Callable[[Any], str]:
    """A wording that names the row's value where ``text`` says {value}."""
    return lambda value: text.replace("{value}", _show(value))


def _rules(name: str) -> list[Rule]:
    import great_expectations.expectations as gxe
    from great_expectations.expectations.row_conditions import Column

    out = [Rule(gxe.ExpectColumnValuesToBeNull(column=DECODE), DECODE,
                lambda v: f"$: {v}")]
    for r in field_rules(name):
        out.append(Rule(gxe.ExpectColumnValuesToBeInSet(
            column=f"{r.name}__type", value_set=sorted(r.types)), f"{r.name}__type",
            _type_problem(r)))
        if r.enum is not None:
            choices = ", ".join(_show(v) for v in r.enum)
            out.append(Rule(
                gxe.ExpectColumnValuesToBeInSet(column=r.name, value_set=list(r.enum)),
                r.name, _words(f"{r.name}: {{value}} is not one of {choices}")))
        if r.minimum is not None:
            out.append(Rule(
                gxe.ExpectColumnValuesToBeBetween(column=r.name, min_value=r.minimum),
                r.name, _words(f"{r.name}: {{value}} is less than the minimum of {r.minimum}")))
        if r.min_length:
            short = ("must not be empty" if r.min_length == 1
                     else f"must be at least {r.min_length} characters long")
            out.append(Rule(
                gxe.ExpectColumnValueLengthsToBeBetween(column=r.name, min_value=r.min_length),
                r.name, _words(f"{r.name}: {short}")))
    out.append(Rule(gxe.ExpectColumnValuesToBeNull(column=UNKNOWN), UNKNOWN,
                    lambda v: f"{v}: unknown field (the schema allows no others)"))
    if name == "broker-metric":
        out.append(Rule(gxe.ExpectColumnValuesToNotBeNull(
            column=LOG_DIR_LABEL, row_condition=Column("metric") == OFFLINE_GAUGE),
            LOG_DIR_LABEL,
            _words(f"labels.log_dir: required for {OFFLINE_GAUGE} (which dir is offline?)")))
    if name == "cluster-snapshot":
        # The column holds the loader's own message: it is the wording.
        out.append(Rule(gxe.ExpectColumnValuesToBeNull(column=LOADER), LOADER, str))
    return out


@dataclass
class Suites:
    """The GX context, one pandas asset and one suite per input schema; build once per
    process (`suites()`), then `reasons()` per micro-batch."""

    context: Any
    batches: dict[str, Any] = field(default_factory=dict)
    suites: dict[str, Any] = field(default_factory=dict)
    rules: dict[str, list[Rule]] = field(default_factory=dict)

    @classmethod
    def build(cls) -> Suites:
        os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")  # no phoning home per batch
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        context = gx.get_context(mode="ephemeral")
        context.variables.progress_bars = ProgressBarsConfig(
            globally=False, metric_calculations=False)
        source = context.data_sources.add_pandas("selfheal-stream")
        out = cls(context)
        for name in INPUT_SCHEMAS:
            asset = source.add_dataframe_asset(name)
            out.batches[name] = asset.add_batch_definition_whole_dataframe(name)
            suite = gx.ExpectationSuite(name=name)
            rules = _rules(name)
            for k, rule in enumerate(rules):
                rule.expectation.meta = {"rule": k}
                suite.add_expectation(rule.expectation)
            out.suites[name] = context.suites.add(suite)
            out.rules[name] = rules
        return out

    def reasons(self, name: str, columns: Mapping[str, list[Any]]) -> list[str | None]:
        """Per row, why it fails suite ``name`` ("field: problem [expectation]; ..."), or
        None when it passes. An expectation that cannot be evaluated raises: rows must
        never pass because a check broke."""
        import pandas as pd

        frame = pd.DataFrame(dict(columns))
        found: list[list[str]] = [[] for _ in range(len(frame))]
        if not len(frame):
            return []
        batch = self.batches[name].get_batch(batch_parameters={"dataframe": frame})
        result = batch.validate(self.suites[name], result_format={"result_format": "COMPLETE"})
        rules = self.rules[name]
        undecoded = set()
        for outcome in result.results:
            if outcome.success:
                continue
            broken = _exception(outcome.exception_info)
            if broken:
                raise RuntimeError(f"suite {name}: {outcome.expectation_config.type} could "
                                   f"not be evaluated: {broken}")
            rule = rules[outcome.expectation_config.meta["rule"]]
            values = columns[rule.column]  # the values as decoded, not as pandas holds them
            for index in outcome.result.get("unexpected_index_list") or ():
                found[index].append(
                    f"{rule.word(values[index])} [{outcome.expectation_config.type}]")
                if rule.column == DECODE:
                    undecoded.add(index)
        order = _field_order(name)
        return [
            None if not problems
            # Not an object: the missing fields that follow from it are noise.
            else next(p for p in problems if p.startswith("$: ")) if k in undecoded
            else "; ".join(sorted(problems, key=order))
            for k, problems in enumerate(found)
        ]


def _exception(info: Mapping[str, Any]) -> str | None:
    """The message of an exception GX caught while evaluating (its info is flat, or
    keyed by metric)."""
    if info.get("raised_exception"):
        return str(info.get("exception_message"))
    for value in info.values():
        if isinstance(value, Mapping) and value.get("raised_exception"):
            return str(value.get("exception_message"))
    return None


def _field_order(name: str) -> Callable[[str], int]:
    order = {r.name: k for k, r in enumerate(field_rules(name))}
    return lambda problem: order.get(problem.split(":", 1)[0], len(order))


_SUITES: Suites | None = None
_LOCK = threading.Lock()


def suites() -> Suites:
    """This process's suites, built on first use (GX's import takes seconds)."""
    global _SUITES
    with _LOCK:
        if _SUITES is None:
            _SUITES = Suites.build()
        return _SUITES
