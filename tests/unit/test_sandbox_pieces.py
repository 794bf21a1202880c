"""The sandbox's pure pieces: jar names, layout, state file, dir lookup, size parsing."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from sandbox import cluster, configs
from sandbox.cli import _bytes
from sandbox.jars import artifact_name, spark_connector_jars
from sandbox.state import SandboxState, load


@pytest.mark.parametrize("jar,name", [
    ("kafka-clients-3.9.2.jar", "kafka-clients"),
    ("spark-sql-kafka-0-10_2.13-4.2.0.jar", "spark-sql-kafka-0-10_2.13"),
    ("zstd-jni-1.5.7-7.jar", "zstd-jni"),
    ("jetty-util-9.4.57.v20241219.jar", "jetty-util"),
    ("javassist-3.30.2-GA.jar", "javassist"),
])
def test_artifact_name_strips_only_the_version(jar, name):
    assert artifact_name(Path(jar)) == name


def test_connector_jars_skip_artifacts_pyspark_already_has(tmp_path, monkeypatch):
    lib, shipped = tmp_path / "lib", tmp_path / "pyspark-jars"
    (lib / "spark").mkdir(parents=True)
    shipped.mkdir()
    for jar in ("kafka-clients-3.9.2.jar", "scala-library-2.13.15.jar",
                "spark-sql-kafka-0-10_2.13-4.2.0.jar"):
        (lib / "spark" / jar).touch()
    (shipped / "scala-library-2.13.16.jar").touch()
    monkeypatch.setenv("SELFHEAL_JVM_LIB", str(lib))
    names = [j.name for j in spark_connector_jars(shipped)]
    assert names == ["kafka-clients-3.9.2.jar", "spark-sql-kafka-0-10_2.13-4.2.0.jar"]


def test_missing_jars_say_to_run_make_jars(tmp_path, monkeypatch):
    monkeypatch.setenv("SELFHEAL_JVM_LIB", str(tmp_path))
    with pytest.raises(RuntimeError, match="make jars"):
        spark_connector_jars(tmp_path)


def test_layout_assigns_racks_round_robin_and_distinct_ports(tmp_path):
    state = cluster.plan_layout(tmp_path, brokers=4, log_dirs=3, racks=3, mode="zk", kafka="3.9")
    assert [b.rack for b in state.brokers] == ["rack1", "rack2", "rack3", "rack1"]
    ports = [s.port for s in state.servers()] + [b.exporter_port for b in state.brokers]
    assert len(set(ports)) == len(ports)
    assert all(len(b.log_dirs) == 3 for b in state.brokers)
    props = Path(state.brokers[3].config).read_text()
    assert "broker.rack=rack1" in props and "listeners=PLAINTEXT://127.0.0.1:" in props
    assert f"zookeeper.connect=127.0.0.1:{state.zookeeper.port}" in props


def test_kraft_layout_keeps_metadata_off_the_jbod_dirs(tmp_path):
    state = cluster.plan_layout(tmp_path, brokers=2, log_dirs=2, racks=0, mode="kraft")
    assert state.zookeeper is None and state.controller is not None
    props = Path(state.brokers[0].config).read_text()
    assert "process.roles=broker" in props and "broker.rack" not in props
    assert state.brokers[0].metadata_dir not in state.brokers[0].log_dirs


def test_bad_layout_arguments_are_refused(tmp_path):
    with pytest.raises(cluster.SandboxError, match="--mode"):
        cluster.plan_layout(tmp_path, 1, 1, 1, "raft")
    with pytest.raises(cluster.SandboxError, match="at least 1"):
        cluster.plan_layout(tmp_path, 0, 1, 1, "zk")


def test_state_file_round_trips_and_exposes_bootstrap(tmp_path):
    state = cluster.plan_layout(tmp_path, brokers=2, log_dirs=1, racks=2, mode="zk", kafka="3.9")
    state.save()
    again = load(tmp_path)
    assert isinstance(again, SandboxState)
    assert again.to_dict() == state.to_dict()
    assert again.bootstrap_servers == ",".join(f"127.0.0.1:{b.port}" for b in state.brokers)


def test_resolve_dir_by_index_or_path_and_errors_name_what_exists(tmp_path):
    state = cluster.plan_layout(tmp_path, brokers=2, log_dirs=2, racks=1, mode="zk", kafka="3.9")
    dirs = state.broker(1).log_dirs
    assert cluster.resolve_dir(state, 1, "1") == dirs[1]
    assert cluster.resolve_dir(state, 1, dirs[0]) == dirs[0]
    with pytest.raises(cluster.SandboxError, match="no broker 5.*0, 1"):
        cluster.resolve_dir(state, 5, "0")
    with pytest.raises(cluster.SandboxError) as err:
        cluster.resolve_dir(state, 1, "2")
    assert dirs[0] in str(err.value) and dirs[1] in str(err.value)


def test_sizes_accept_units_and_reject_nonsense():
    assert _bytes("1000") == 1000
    assert _bytes("64M") == 64 * 2**20
    assert _bytes("1GiB") == 2**30
    with pytest.raises(argparse.ArgumentTypeError, match="not a size"):
        _bytes("lots")


def test_properties_are_written_one_per_line(tmp_path):
    path = configs.write_properties(tmp_path / "x.properties", {"a": 1, "b.c": "d"})
    assert path.read_text() == "a=1\nb.c=d\n"


def test_placement_maps_dirs_to_current_replicas_and_skips_future_ones():
    from sandbox.status import placement

    reply = {"log_dirs": [
        {"log_dir": "/d0", "topics": [
            {"name": "t", "partitions": [
                {"partition_index": 0, "partition_size": 10, "is_future_key": False},
                {"partition_index": 1, "partition_size": 5, "is_future_key": True}]},
            {"name": "other", "partitions": [
                {"partition_index": 0, "partition_size": 99, "is_future_key": False}]}]},
        {"log_dir": "/d1", "topics": []},
    ]}
    assert placement(reply, "t") == {"/d0": {0: 10}, "/d1": {}}


def test_a_cluster_id_never_starts_with_a_dash():
    """`kafka-storage format -t -enyj...` reads such an id as an option; Kafka draws again."""
    draws = iter([b"\xf8" + bytes(15), b"\x00" * 16])  # "-AAA...", then "AAA..."
    assert cluster._new_cluster_id(lambda: next(draws)) == "A" * 22
    assert all(not cluster._new_cluster_id().startswith("-") for _ in range(2000))
