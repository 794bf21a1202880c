"""The Kafka lines the sandbox runs: one table (sandbox/versions.py) held equal to
jvm/pom.xml, and what each line writes differently."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from sandbox import cluster, jvm, versions
from tests.conftest import run_cli

POM = Path(__file__).resolve().parents[2] / "jvm" / "pom.xml"
NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def _pom_kafka_profiles() -> dict[str, str]:
    """profile id -> the kafka_2.13 version it pins."""
    root = ET.parse(POM).getroot()
    props = {p.tag.split("}")[1]: p.text for p in root.find("m:properties", NS)}
    found = {}
    for profile in root.iterfind("m:profiles/m:profile", NS):
        for dep in profile.iterfind("m:dependencies/m:dependency", NS):
            if dep.findtext("m:artifactId", namespaces=NS) == "kafka_2.13":
                version = dep.findtext("m:version", namespaces=NS)
                found[profile.findtext("m:id", namespaces=NS)] = props.get(
                    version.strip("${}"), version)
    return found


def test_the_pom_pins_exactly_the_lines_of_the_table():
    assert _pom_kafka_profiles() == {k.jars_role: k.version for k in versions.LINES.values()}


def test_the_default_is_the_newest_line_in_kraft_and_zookeeper_lives_on_3_9_only():
    newest = max(versions.LINES, key=lambda n: tuple(int(x) for x in n.split(".")))
    assert versions.DEFAULT_LINE == newest
    assert versions.default_mode(versions.DEFAULT_LINE) == "kraft"
    assert [k.line for k in versions.LINES.values() if "zk" in k.modes] == ["3.9"]


def test_zookeeper_mode_on_4_x_is_refused_in_one_line_that_says_what_to_do(tmp_path):
    with pytest.raises(cluster.SandboxError) as err:
        cluster.plan_layout(tmp_path, 1, 1, 1, mode="zk", kafka="4.4")
    message = str(err.value)
    assert "\n" not in message and "KRaft only" in message
    assert "--mode kraft" in message and "--kafka 3.9" in message
    assert not list(tmp_path.iterdir())  # nothing written


def test_the_cli_refuses_zookeeper_on_4_x_with_that_line_and_starts_nothing(tmp_path):
    done = run_cli(["sandbox", "--work-dir", str(tmp_path / "sb"), "up", "--kafka", "4.4",
                    "--mode", "zk"], timeout=60)
    assert done.returncode == 1
    assert "KRaft only" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "sb" / "sandbox.json").exists()


def test_an_unknown_line_is_refused_naming_the_lines(tmp_path):
    with pytest.raises(cluster.SandboxError, match="3.9, 4.4"):
        cluster.plan_layout(tmp_path, 1, 1, 1, kafka="2.8")


def test_4_x_writes_log4j2_and_a_dynamic_quorum(tmp_path):
    state = cluster.plan_layout(tmp_path, brokers=2, log_dirs=2, racks=2, kafka="4.4")
    assert (state.mode, state.kafka, state.quorum) == ("kraft", "4.4", "dynamic")
    conf = Path(state.brokers[0].config).parent
    assert "RollingFile" in (conf / "log4j2.properties").read_text()
    assert not (conf / "log4j.properties").exists()
    broker = Path(state.brokers[0].config).read_text()
    assert f"controller.quorum.bootstrap.servers=127.0.0.1:{state.controller.port}" in broker
    assert "controller.quorum.voters" not in broker
    cmd = jvm.server_command(state, state.brokers[0])
    assert any(a.startswith("-Dlog4j2.configurationFile=file:") for a in cmd)
    assert "kafka-4.4" in cmd[cmd.index("-cp") + 1]


def test_3_9_kraft_keeps_static_voters_and_reload4j(tmp_path):
    state = cluster.plan_layout(tmp_path, brokers=1, log_dirs=1, racks=0, mode="kraft",
                                kafka="3.9")
    assert state.quorum == "static"
    broker = Path(state.brokers[0].config).read_text()
    assert f"controller.quorum.voters=100@127.0.0.1:{state.controller.port}" in broker
    cmd = jvm.server_command(state, state.controller)
    assert any(a.startswith("-Dlog4j.configuration=file:") for a in cmd)


def test_a_broker_upgraded_to_another_line_runs_its_jars_in_the_cluster_s_quorum(tmp_path):
    state = cluster.plan_layout(tmp_path, brokers=2, log_dirs=1, racks=0, mode="kraft",
                                kafka="3.9")
    state.brokers[1].kafka = "4.4"
    assert "kafka-3.9" in jvm.server_command(state, state.brokers[0])[-3]
    upgraded = jvm.server_command(state, state.brokers[1])
    assert "kafka-4.4" in upgraded[upgraded.index("-cp") + 1]
    # a static quorum stays static: an upgraded broker still names the voters
    assert "controller.quorum.voters" in Path(state.brokers[1].config).read_text()
    assert state.to_dict()["brokers"][1]["kafka"] == "4.4"

