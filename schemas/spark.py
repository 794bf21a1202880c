"""Spark `StructType`s derived from the JSON Schema files at runtime.

string -> StringType, integer -> LongType, number -> DoubleType, boolean -> BooleanType,
object with properties -> StructType, object with only additionalProperties -> MapType
(string keys), array -> ArrayType. A field is nullable when the schema does not require
it or allows null. Free-form objects (the action ``plan``) and mixed types become a
StringType holding JSON text: Spark's JSON reader hands a nested object to a string field
as its raw JSON, so ``from_json`` keeps the whole plan. Date-times stay strings; the job
parses the ones it windows on. pyspark is imported inside the functions, so importing
this module stays cheap.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from schemas.registry import json_types, resolve, schema

_SCALARS = {"string": "StringType", "integer": "LongType", "number": "DoubleType",
            "boolean": "BooleanType"}


def is_nullable(node: Mapping[str, Any], root: Mapping[str, Any] | None = None) -> bool:
    return "null" in json_types(resolve(node, root or {}))


def spark_type(node: Mapping[str, Any], root: Mapping[str, Any] | None = None) -> Any:
    """The Spark DataType for one JSON Schema node (``root`` resolves ``#/$defs`` refs)."""
    from pyspark.sql import types as T

    root = root if root is not None else node
    node = resolve(node, root)
    kinds = [t for t in json_types(node) if t != "null"]
    if len(kinds) != 1:
        return T.StringType()  # no single Spark type: keep the JSON text
    kind = kinds[0]
    if kind in _SCALARS:
        return getattr(T, _SCALARS[kind])()
    if kind == "array":
        items = node.get("items", {})
        return T.ArrayType(spark_type(items, root), containsNull=is_nullable(items, root))
    if kind == "object":
        if "properties" in node:
            required = set(node.get("required", ()))
            return T.StructType([
                T.StructField(name, spark_type(prop, root),
                              nullable=name not in required or is_nullable(prop, root))
                for name, prop in node["properties"].items()
            ])
        values = node.get("additionalProperties")
        if isinstance(values, Mapping):
            return T.MapType(T.StringType(), spark_type(values, root),
                             valueContainsNull=is_nullable(values, root))
        return T.StringType()  # free-form object: JSON text
    raise ValueError(f"JSON Schema type {kind!r} has no Spark type")


def struct_type(name: str) -> Any:
    """The `StructType` of schema ``name`` (e.g. "broker-metric"), for ``from_json``."""
    root = schema(name)
    result = spark_type(root, root)
    from pyspark.sql.types import StructType

    if not isinstance(result, StructType):
        raise TypeError(f"schema {name} is not an object with properties")
    return result
