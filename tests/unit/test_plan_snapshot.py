"""The snapshot loader: it accepts what the JSON Schema accepts, then checks references,
and names the first bad field."""

from __future__ import annotations

import copy
import dataclasses
import json
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.model import ClusterModel
from schemas.snapshot import (
    Broker,
    Partition,
    Replica,
    SnapshotError,
    parse_snapshot,
    snapshot_from_dict,
)
from schemas.snapshot_types import SCHEMA_PATH

SELFHEAL = str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "selfheal")
VALIDATOR = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))

# The issue's example, with both brokers it names and a null-heavy third one.
EXAMPLE: dict[str, Any] = {
    "version": 1,
    "cluster_id": "c1",
    "taken_at": "2026-11-22T00:00:00Z",
    "brokers": [
        {
            "id": 0,
            "rack": "r1",
            "alive": True,
            "log_dirs": [
                {"path": "/data/d1", "online": True, "total_bytes": 1000000, "usable_bytes": 400000}
            ],
        },
        {"id": 1, "rack": "r2", "alive": True,
         "log_dirs": [{"path": "/data/d1", "online": True, "cordoned": True}]},
        {
            "id": 2,
            "rack": None,
            "alive": False,
            "log_dirs": [
                {"path": "/data/d1", "online": False, "total_bytes": None, "usable_bytes": None}
            ],
        },
    ],
    "partitions": [
        {
            "topic": "t",
            "partition": 0,
            "leader": 0,
            "isr": [0, 1],
            "replicas": [
                {"broker": 0, "log_dir": "/data/d1", "size_bytes": 1234},
                {"broker": 1, "log_dir": "/data/d1", "size_bytes": 1234},
                {"broker": 2, "log_dir": None, "size_bytes": 0},
            ],
        },
        {
            "topic": "t",
            "partition": 1,
            "leader": -1,
            "isr": [],
            "replicas": [{"broker": 2, "size_bytes": 0}],
        },
    ],
    "consumer_groups": [
        {
            "group": "g",
            "members": [{"member_id": "m1", "client_id": "c", "rack": "r1", "topics": ["t"]}],
        }
    ],
}


def mutate(path: str, value: Any = None, delete: bool = False) -> dict[str, Any]:
    """A copy of EXAMPLE with the field at `path` (a.b[0].c) replaced or deleted."""
    doc = copy.deepcopy(EXAMPLE)
    parts = path.replace("[", ".").replace("]", "").split(".")
    node: Any = doc
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node[part]
    last: Any = int(parts[-1]) if parts[-1].isdigit() else parts[-1]
    if delete:
        del node[last]
    else:
        node[last] = value
    return doc


def error_of(doc: Any) -> SnapshotError:
    with pytest.raises(SnapshotError) as caught:
        snapshot_from_dict(doc)
    return caught.value


def test_the_issue_example_loads_into_typed_records():
    snap = snapshot_from_dict(EXAMPLE)
    assert snap.cluster_id == "c1"
    assert snap.brokers[0] == Broker(0, "r1", True, snap.brokers[0].log_dirs)
    assert snap.brokers[1].log_dirs[0].total_bytes is None
    assert snap.partitions[0].replicas[2] == Replica(2, None, 0)
    assert snap.partitions[1].replicas[0].log_dir is None
    assert snap.consumer_groups[0].members[0].rack == "r1"
    assert VALIDATOR.is_valid(EXAMPLE)
    # Built by filling slots directly, the records are still frozen and compare as usual.
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.partitions[0].replicas[0].broker = 5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.partitions[0].leader = 1  # type: ignore[misc]
    assert snap.partitions[1] == Partition("t", 1, -1, (), (Replica(2, None, 0),))


def test_consumer_groups_may_be_absent():
    doc = mutate("consumer_groups", delete=True)
    assert snapshot_from_dict(doc).consumer_groups == ()


def test_offline_replicas_follow_the_rule_dead_broker_offline_dir_or_unknown_dir():
    doc = copy.deepcopy(EXAMPLE)
    doc["brokers"].append(
        {
            "id": 3,
            "alive": True,
            "log_dirs": [{"path": "/a", "online": True}, {"path": "/b", "online": False}],
        }
    )
    doc["brokers"].append({"id": 4, "alive": True, "log_dirs": [{"path": "/a", "online": True}]})
    doc["partitions"].append(
        {
            "topic": "u",
            "partition": 0,
            "leader": 0,
            "isr": [0],
            "replicas": [
                {"broker": 0, "log_dir": "/data/d1", "size_bytes": 1},  # online
                {
                    "broker": 3,
                    "log_dir": None,
                    "size_bytes": 0,
                },  # unknown dir, broker has a bad one
                {"broker": 4, "log_dir": None, "size_bytes": 0},  # unknown dir, healthy broker
            ],
        }
    )
    m = ClusterModel(snapshot_from_dict(doc))
    p0, _, u = m.partitions
    assert [m.is_offline(r) for r in p0.replicas] == [False, False, True]  # broker 2 is down
    assert [m.is_offline(r) for r in u.replicas] == [False, True, False]
    assert m.partitions_with_offline_replicas == (0, 1, 2)


@pytest.mark.parametrize(
    ("doc", "path", "words"),
    [
        (mutate("version", 2), "version", "unsupported snapshot version 2"),
        (mutate("cluster_id", delete=True), "cluster_id", "required field is missing"),
        (mutate("brokers[0].id", "0"), "brokers[0].id", 'expected an integer, got "0"'),
        (mutate("brokers[0].id", True), "brokers[0].id", "expected an integer, got true"),
        (mutate("brokers[1].id", 0), "brokers[1].id", "broker 0 appears twice"),
        (mutate("brokers[0].alive", "yes"), "brokers[0].alive", "expected true or false"),
        (mutate("brokers[0].log_dirs[0].total_bytes", -1), "brokers[0].log_dirs[0].total_bytes", ">= 0"),  # noqa: E501
        (mutate("brokers[0].log_dirs[0].size", 1), "brokers[0].log_dirs[0].size", "unknown field"),
        (mutate("partitions[0].replicas[1].broker", 7), "partitions[0].replicas[1].broker",
         "broker 7 is not in brokers"),
        (mutate("partitions[1].partition", 0), "partitions[1].partition", "t-0 appears twice"),
        (mutate("partitions[0].replicas[1].log_dir", "/data/d9"), "partitions[0].replicas[1].log_dir",  # noqa: E501
         "/data/d9 is not a log dir of broker 1"),
        (mutate("partitions[0].replicas[1].broker", 0), "partitions[0].replicas[1].broker",
         "broker 0 holds two replicas of t-0"),
        (mutate("partitions[0].replicas[1].size_bytes", 1.5), "partitions[0].replicas[1].size_bytes",  # noqa: E501
         "expected an integer, got 1.5"),
        (mutate("partitions[0].replicas", []), "partitions[0].replicas", "at least one replica"),
        (mutate("partitions[1].leader", 0), "partitions[1].leader", "broker 0 is not a replica of t-1"),  # noqa: E501
        (mutate("partitions[0].leader", -2), "partitions[0].leader", ">= -1"),
        (mutate("partitions[0].isr", [0, 5]), "partitions[0].isr[1]", "broker 5 is not a replica"),
        (mutate("partitions[0].topic", ""), "partitions[0].topic", "must not be empty"),
        (mutate("partitions[1]", 3), "partitions[1]", "expected an object, got integer"),
        (mutate("consumer_groups[0].members[0].topics", "t"), "consumer_groups[0].members[0].topics",  # noqa: E501
         "expected an array"),
    ],
)  # fmt: skip
def test_errors_name_the_first_bad_field(doc, path, words):
    err = error_of(doc)
    assert err.path == path
    assert words in str(err)
    assert str(err).startswith(f"{path}: ")


def test_the_first_bad_field_in_document_order_is_named():
    doc = mutate("partitions[1].leader", "x")
    doc["partitions"][0]["replicas"][0]["broker"] = 99
    assert error_of(doc).path == "partitions[0].replicas[0].broker"


def test_bad_json_names_line_and_column():
    with pytest.raises(SnapshotError, match=r"\$: invalid JSON at line 2 column 1"):
        parse_snapshot('{"version": 1,\n}')


def test_integers_written_as_3_0_are_integers_as_in_json_schema():
    doc = mutate("partitions[0].replicas[0].size_bytes", 1234.0)
    assert snapshot_from_dict(doc).partitions[0].replicas[0].size_bytes == 1234
    assert VALIDATOR.is_valid(doc)


# --- the schema file and the fast loader agree -------------------------------------------

SAMPLES = [
    EXAMPLE,
    mutate("version", 1.0),
    mutate("version", True),
    mutate("brokers[0].rack", ""),
    mutate("brokers[0].rack", None),
    mutate("brokers[0].rack", delete=True),
    mutate("brokers[0].log_dirs", []),
    mutate("brokers[0].log_dirs[0].usable_bytes", 1.0),
    mutate("brokers[0].log_dirs[0].usable_bytes", 1.1),
    mutate("brokers[1].log_dirs[0].cordoned", None),
    mutate("brokers[1].log_dirs[0].cordoned", 1),
    mutate("brokers[1].log_dirs[0].cordoned", delete=True),
    mutate("partitions", {}),
    mutate("partitions[0].isr", [0, 1.0]),
    mutate("partitions[1].isr", [0, None]),  # not a replica, and not an integer: schema first
    mutate("partitions[0].isr", [-1]),
    mutate("partitions[0].isr", None),
    mutate("partitions[0].replicas[0].log_dir", ""),
    mutate("partitions[0].replicas[0].log_dir", 3),
    mutate("partitions[0].replicas[0].extra", 3),
    mutate("partitions[0].replicas[0]", []),
    mutate("partitions[1].replicas[0].size_bytes", delete=True),
    mutate("consumer_groups", None),
    mutate("consumer_groups[0].members[0].client_id", ""),
    mutate("consumer_groups[0].members[0].member_id", ""),
    mutate("consumer_groups[0].members[0].group_instance_id", "i1"),
    mutate("consumer_groups[0].members[0].group_instance_id", ""),
    mutate("consumer_groups[0].members[0].topics", [""]),
    mutate("consumer_groups[0].members", [{"member_id": "m", "client_id": "c", "topics": []}]),
    mutate("taken_at", 5),
    mutate("extra", {}),
    [],
    None,
]


def agree(doc: Any) -> None:
    schema_ok = VALIDATOR.is_valid(doc)
    try:
        snapshot_from_dict(doc)
    except SnapshotError as exc:
        # The loader may only add cross-reference checks to what the schema accepts.
        assert exc.kind == ("consistency" if schema_ok else "schema"), (exc, schema_ok)
    else:
        assert schema_ok, "the loader accepted what the schema rejects"


@pytest.mark.parametrize("doc", SAMPLES)
def test_schema_and_fast_validator_accept_and_reject_the_same_samples(doc):
    agree(doc)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from([0.5, 2.0])
    | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2)
    ),
    max_leaves=4,
)


def paths(node: Any, prefix: str = "") -> list[str]:
    out: list[str] = []
    items = (
        node.items()
        if isinstance(node, dict)
        else enumerate(node)
        if isinstance(node, list)
        else ()
    )
    for key, value in items:
        here = (
            f"{prefix}[{key}]" if isinstance(key, int) else (f"{prefix}.{key}" if prefix else key)
        )
        out.append(here)
        out += paths(value, here)
    return out


ALL_PATHS = paths(EXAMPLE)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(ALL_PATHS), value=json_values, delete=st.booleans())
def test_schema_and_fast_validator_agree_on_random_mutations(path, value, delete):
    agree(mutate(path, value, delete=delete))


@settings(max_examples=100, deadline=None)
@given(path=st.sampled_from(ALL_PATHS), value=st.integers(-2, 9))
def test_schema_and_fast_validator_agree_on_plausible_numbers(path, value):
    agree(mutate(path, value))


# --- CLI ---------------------------------------------------------------------------------


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SELFHEAL, "plan", *args], check=False, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("command", ["offline", "disks", "leaders"])
def test_cli_malformed_snapshot_exits_2_naming_the_field(tmp_path, command):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(mutate("partitions[0].replicas[1].broker", 7)))
    done = run(command, "--snapshot", str(path))
    assert done.returncode == 2
    assert done.stdout == ""
    assert "partitions[0].replicas[1].broker: broker 7 is not in brokers" in done.stderr
    assert "Traceback" not in done.stderr


def test_cli_bad_json_and_missing_file_exit_2(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{")
    done = run("offline", "--snapshot", str(path))
    assert done.returncode == 2
    assert "invalid JSON" in done.stderr
    missing = run("offline", "--snapshot", str(tmp_path / "nope.json"))
    assert missing.returncode == 2
    assert "cannot read" in missing.stderr
