"""Spark StructTypes derived from the schema files agree with the schemas and the dataclasses.

pyspark.sql.types needs no JVM, so these stay unit tests.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

import pytest
from pyspark.sql import types as T

from schemas import registry
from schemas.records import RECORD_TYPES
from schemas.spark import spark_type, struct_type


def expected_type(hint: Any) -> T.DataType:
    """The Spark type a dataclass field's Python type implies."""
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        (inner,) = [a for a in typing.get_args(hint) if a is not type(None)]
        return expected_type(inner)
    if dataclasses.is_dataclass(hint):
        hints = typing.get_type_hints(hint)
        return T.StructType([T.StructField(f.name, expected_type(hints[f.name]))
                             for f in dataclasses.fields(hint) if f.init])  # not caches
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple:
        return T.ArrayType(expected_type(args[0]))
    if origin is dict:
        # dict[str, Any] is a free-form object: JSON text in Spark.
        return T.StringType() if args[1] is Any else T.MapType(T.StringType(),
                                                               expected_type(args[1]))
    return {str: T.StringType(), int: T.LongType(), float: T.DoubleType(),
            bool: T.BooleanType()}[hint]


def shape(t: T.DataType) -> Any:
    """A type with nullability and field order left out."""
    if isinstance(t, T.StructType):
        return {f.name: shape(f.dataType) for f in t.fields}
    if isinstance(t, T.ArrayType):
        return ("array", shape(t.elementType))
    if isinstance(t, T.MapType):
        return ("map", shape(t.keyType), shape(t.valueType))
    return t.simpleString()


@pytest.mark.parametrize("name", registry.names())
def test_struct_fields_follow_the_schema_properties_in_order(name):
    doc = registry.schema(name)
    struct = struct_type(name)
    assert struct.names == list(doc["properties"])
    required = set(doc["required"])
    for field in struct.fields:
        prop = registry.resolve(doc["properties"][field.name], doc)
        nullable = field.name not in required or "null" in registry.json_types(prop)
        assert field.nullable is nullable, field.name


@pytest.mark.parametrize("name", sorted(RECORD_TYPES))
def test_struct_types_agree_with_the_dataclasses(name):
    assert shape(struct_type(name)) == shape(expected_type(RECORD_TYPES[name]))


def test_scalar_and_container_mapping():
    assert spark_type({"type": "string"}) == T.StringType()
    assert spark_type({"type": "integer"}) == T.LongType()
    assert spark_type({"type": "number"}) == T.DoubleType()
    assert spark_type({"type": "boolean"}) == T.BooleanType()
    assert spark_type({"const": 1}) == T.LongType()
    assert spark_type({"type": "array", "items": {"type": ["integer", "null"]}}) == T.ArrayType(
        T.LongType(), containsNull=True)
    assert spark_type({"type": "object", "additionalProperties": {"type": "number"}}) == (
        T.MapType(T.StringType(), T.DoubleType(), valueContainsNull=False))


def test_free_form_and_mixed_types_are_json_text():
    assert spark_type({"type": "object"}) == T.StringType()
    assert spark_type({"type": ["integer", "string"]}) == T.StringType()
    assert struct_type("action")["plan"].dataType == T.StringType()


def test_the_metric_labels_are_a_string_map():
    labels = struct_type("broker-metric")["labels"]
    assert labels.dataType == T.MapType(T.StringType(), T.StringType(), valueContainsNull=False)
    assert labels.nullable


def test_required_non_null_fields_are_not_nullable():
    struct = struct_type("action")
    assert not struct["action_id"].nullable
    assert struct["trigger"].dataType["broker"].nullable
    assert not struct["trigger"].dataType["kind"].nullable


def test_remote_refs_are_refused():
    with pytest.raises(ValueError, match="only local"):
        spark_type({"$ref": "https://example.com/x.json"})
