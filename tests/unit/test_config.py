"""core.config: defaults, file, environment overrides, sandbox fallback, errors."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from core.config import SECTIONS, Config, ConfigError, load
from sandbox.state import SandboxState, ServerState


def write(tmp_path: Path, text: str, name: str = "selfheal.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def fake_sandbox(work_dir: Path, mode: str = "zk") -> SandboxState:
    """A state file like `selfheal sandbox up` writes; no process behind it."""
    brokers = [
        ServerState(role="broker", node_id=i, port=19090 + i, pid=None, config=f"b{i}.properties",
                    log_file=f"b{i}.log", exporter_port=17070 + i, rack=f"r{i}")
        for i in (1, 2, 3)
    ]
    zk = ServerState(role="zookeeper", node_id=0, port=12181, pid=None, config="zk.properties",
                     log_file="zk.log") if mode == "zk" else None
    state = SandboxState(mode=mode, work_dir=str(work_dir), cluster_id="sandbox-cluster",
                         brokers=brokers, zookeeper=zk)
    state.save()
    return state


@pytest.fixture
def no_sandbox(tmp_path: Path) -> dict[str, str]:
    """An environment whose sandbox dir holds no state file."""
    empty = tmp_path / "no-sandbox"
    empty.mkdir()
    return {"SELFHEAL_SANDBOX_DIR": str(empty)}


def test_defaults_without_file_env_or_sandbox(no_sandbox):
    config = load(env=no_sandbox)
    assert config.cluster.bootstrap_servers is None
    assert config.bus.topic_prefix == "selfheal."
    assert config.detect.disk_skew_threshold == 1.10
    assert (config.serve.http_host, config.serve.http_port) == ("127.0.0.1", 8787)
    assert config.sources == ()
    with pytest.raises(ConfigError, match="selfheal sandbox up"):
        config.require_bootstrap_servers()


def test_the_file_sets_values_and_the_environment_overrides_them(tmp_path, no_sandbox):
    path = write(tmp_path, """
policy = "policy.toml"
[cluster]
bootstrap_servers = "kafka-1:9092,kafka-2:9092"
mode = "kraft"
[detect]
disk_skew_threshold = 1.25
skew_window_seconds = 600
[stream]
checkpoint_dir = "ckpt"
""")
    env = no_sandbox | {
        "SELFHEAL_DETECT_DISK_SKEW_THRESHOLD": "1.5",
        "SELFHEAL_SERVE_HTTP_PORT": "9000",
        "SELFHEAL_BUS_TOPIC_PREFIX": "prod.selfheal.",
    }
    config = load(path, env)
    assert config.cluster.bootstrap_servers == "kafka-1:9092,kafka-2:9092"
    assert config.cluster.mode == "kraft"
    assert config.detect.disk_skew_threshold == 1.5  # env beats file
    assert config.detect.skew_window_seconds == 600.0  # TOML int read as a float
    assert config.serve.http_port == 9000
    assert config.stream.checkpoint_dir == tmp_path / "ckpt"  # relative to the file
    assert config.policy == tmp_path / "policy.toml"
    assert config.topic("actions") == "prod.selfheal.actions"
    assert config.sources == (str(path), "environment")


def test_the_config_path_may_come_from_the_environment(tmp_path, no_sandbox):
    path = write(tmp_path, "[serve]\nhttp_port = 8000\n")
    assert load(env=no_sandbox | {"SELFHEAL_CONFIG": str(path)}).serve.http_port == 8000


def test_the_bus_defaults_to_the_monitored_cluster(tmp_path, no_sandbox):
    path = write(tmp_path, '[cluster]\nbootstrap_servers = "k:9092"\n')
    assert load(path, no_sandbox).bus.bootstrap_servers == "k:9092"
    env = no_sandbox | {"SELFHEAL_BUS_BOOTSTRAP_SERVERS": "bus:9092"}
    assert load(path, env).bus.bootstrap_servers == "bus:9092"


def test_an_empty_variable_unsets_an_optional_file_value(tmp_path, no_sandbox):
    path = write(tmp_path, '[serve]\napi_token = "s3cret"\n')
    assert load(path, no_sandbox).serve.api_token == "s3cret"
    assert load(path, no_sandbox | {"SELFHEAL_SERVE_API_TOKEN": ""}).serve.api_token is None


def test_secrets_stay_out_of_the_repr(tmp_path, no_sandbox):
    path = write(tmp_path, '[serve]\napi_token = "s3cret"\nlink_secret = "l1nk"\n')
    text = repr(load(path, no_sandbox))
    assert "s3cret" not in text and "l1nk" not in text


def test_the_sandbox_fills_an_unconfigured_cluster(tmp_path):
    state = fake_sandbox(tmp_path / "sb")
    config = load(env={"SELFHEAL_SANDBOX_DIR": state.work_dir})
    assert config.cluster.bootstrap_servers == "127.0.0.1:19091,127.0.0.1:19092,127.0.0.1:19093"
    assert config.cluster.zookeeper_connect == "127.0.0.1:12181"
    assert (config.cluster.mode, config.cluster.cluster_id) == ("zk", "sandbox-cluster")
    assert config.cluster.exporter_urls[0] == "http://127.0.0.1:17071/metrics"
    assert len(config.cluster.exporter_urls) == 3
    assert config.bus.bootstrap_servers == config.cluster.bootstrap_servers
    assert config.sources == (f"sandbox {state.path}",)


def test_explicit_values_beat_the_sandbox(tmp_path):
    state = fake_sandbox(tmp_path / "sb", mode="kraft")
    env = {"SELFHEAL_SANDBOX_DIR": state.work_dir, "SELFHEAL_CLUSTER_CLUSTER_ID": "mine"}
    config = load(env=env)
    assert (config.cluster.mode, config.cluster.cluster_id) == ("kraft", "mine")
    assert config.cluster.zookeeper_connect is None


def test_configured_bootstrap_servers_ignore_the_sandbox(tmp_path):
    state = fake_sandbox(tmp_path / "sb")
    env = {"SELFHEAL_SANDBOX_DIR": state.work_dir, "SELFHEAL_CLUSTER_BOOTSTRAP_SERVERS": "k:9092"}
    config = load(env=env)
    # Another cluster: the sandbox's ZooKeeper and exporters would be wrong for it.
    assert config.cluster.zookeeper_connect is None
    assert config.cluster.exporter_urls == ()


def test_a_corrupt_sandbox_state_is_a_clear_error(tmp_path):
    (tmp_path / "sandbox.json").write_text("{")
    with pytest.raises(ConfigError, match="sandbox state file is unreadable"):
        load(env={"SELFHEAL_SANDBOX_DIR": str(tmp_path)})


@pytest.mark.parametrize("toml,message", [
    ("[detect]\ndisk_skew_threshold = 0.9\n", "detect.disk_skew_threshold in {f}: must be >= 1.0"),
    ('[detect]\ndisk_skew_threshold = "high"\n',
     "detect.disk_skew_threshold in {f}: expected a number, got 'high'"),
    ("[serve]\nhttp_port = 70000\n", "serve.http_port in {f}: must be a port"),
    ("[serve]\nhttp_port = true\n", "serve.http_port in {f}: expected an integer"),
    ('[cluster]\nmode = "kraftt"\n', "cluster.mode in {f}: must be one of zk, kraft"),
    ('[cluster]\nbootstrap_servers = "localhost"\n',
     "cluster.bootstrap_servers in {f}: must be host:port"),
    ('[bus]\ntopic_prefix = "self heal."\n', "bus.topic_prefix in {f}: may hold only"),
    ("[collect]\nscrape_interval_seconds = 0\n",
     "collect.scrape_interval_seconds in {f}: must be > 0"),
    ("[detect]\ndisk_skew = 1.2\n", "unknown key detect.disk_skew in {f}; known: disk_skew_"),
    ("[dettect]\nx = 1\n", "unknown section or key 'dettect' in {f}; known: cluster, bus"),
    ("detect = 3\n", "detect in {f}: expected a \\[detect\\] table"),
    ("[detect\n", "{f} is not valid TOML"),
])
def test_bad_file_values_name_the_key_and_the_file(tmp_path, no_sandbox, toml, message):
    path = write(tmp_path, toml)
    with pytest.raises(ConfigError, match="^" + message.format(f=re.escape(str(path)))):
        load(path, no_sandbox)


@pytest.mark.parametrize("var,value,message", [
    ("SELFHEAL_DETECT_DISK_SKEW_THRESHOLD", "abc",
     "detect.disk_skew_threshold from SELFHEAL_DETECT_DISK_SKEW_THRESHOLD: expected a number"),
    ("SELFHEAL_SERVE_HTTP_PORT", "-1", "serve.http_port from SELFHEAL_SERVE_HTTP_PORT: must be"),
    ("SELFHEAL_COLLECT_SCRAPE_INTERVAL", "5",
     "unknown key collect.scrape_interval from SELFHEAL_COLLECT_SCRAPE_INTERVAL; known:"),
])
def test_bad_environment_values_name_the_variable(no_sandbox, var, value, message):
    with pytest.raises(ConfigError, match="^" + message):
        load(env=no_sandbox | {var: value})


def test_variables_outside_the_sections_are_not_config(no_sandbox):
    env = no_sandbox | {"SELFHEAL_SPARK_MASTER": "local[4]", "SELFHEAL_SANDBOX_DIR_X": "y"}
    assert load(env=env).cluster.bootstrap_servers is None


def test_a_missing_config_file_is_an_error(tmp_path, no_sandbox):
    with pytest.raises(ConfigError, match="does not exist"):
        load(tmp_path / "nope.toml", no_sandbox)


def test_exporter_urls_from_a_list_or_a_comma_string(tmp_path, no_sandbox):
    path = write(tmp_path, '[cluster]\nexporter_urls = ["http://a/metrics", "http://b/metrics"]\n')
    assert load(path, no_sandbox).cluster.exporter_urls == ("http://a/metrics", "http://b/metrics")
    env = no_sandbox | {"SELFHEAL_CLUSTER_EXPORTER_URLS": "http://c/metrics, http://d/metrics"}
    assert load(env=env).cluster.exporter_urls == ("http://c/metrics", "http://d/metrics")


def test_topic_names_take_the_prefix_and_refuse_unknown_topics():
    config = Config()
    assert config.topic("broker-metrics") == "selfheal.broker-metrics"
    assert config.topic("selfheal.dead-letter") == "selfheal.dead-letter"
    with pytest.raises(ValueError, match="unknown topic 'action'"):
        config.topic("action")


EXAMPLE = Path(__file__).parents[2] / "core" / "selfheal.example.toml"


def test_the_example_file_documents_every_key_with_its_default(no_sandbox):
    text = EXAMPLE.read_text()
    for section, cls in SECTIONS.items():
        assert f"[{section}]" in text
        for f in dataclasses.fields(cls):
            assert re.search(rf"^#? ?{f.name} = ", text, re.MULTILINE), f"{section}.{f.name}"
    example, defaults = load(EXAMPLE, no_sandbox), load(env=no_sandbox)
    for section in SECTIONS:
        field = section.replace(".", "_")  # [cluster.security] -> Config.cluster_security
        assert getattr(example, field) == getattr(defaults, field), section
