"""Every client the product makes takes its security settings from core/security.py.

Cruise Control shipped clients that forgot the SASL settings (#36, #583) and a metrics path
that silently reported nothing (#243). Here a client built anywhere but in the factories
below, or a factory that stops calling its translating function, fails the suite.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from core.config import ConfigError, load

ROOT = Path(__file__).parents[2]
PRODUCT = ["core", "streams", "remediation", "selfheal", "airflow/dags"]

# What makes a client, and the one function each must get its settings from.
CONSTRUCTORS = {
    "AdminClient": "confluent", "Producer": "confluent", "Consumer": "confluent",
    "KafkaAdminClient": "kafka-python", "KazooClient": "kazoo", "urlopen": "http",
}
TRANSLATORS = {
    "confluent": {"confluent_settings", "client_config"},
    "kafka-python": {"kafka_python_settings"},
    "kazoo": {"kazoo_settings"},
    "spark": {"spark_options"},
    "http": {"exporter_settings"},
}
# Modules that build a client from settings handed to them, and why that is sound.
HANDED_IN = {
    "core/bus.py": "consumer_on(client): client_config's settings, or BusChunks' copy of them",
    "remediation/executor/lock.py": "GroupLeadership gets core.bus.client_config(config)",
    "remediation/consumers/consumer.py": "a library: the application's own consumer settings "
                                         "(security.*, sasl.*, ssl.* passed on)",
    "remediation/consumers/targets.py": "the same application settings",
    "remediation/service/pager.py": "HTTPS to PagerDuty/Slack, the system's CAs",
    "airflow/dags/selfheal_dag_support/serve_api.py": "serve's own HTTP API",
    "core/security.py": "the OIDC token request itself",
}


def _modules() -> list[Path]:
    return sorted(p for d in PRODUCT for p in (ROOT / d).rglob("*.py"))


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _clients(tree: ast.AST) -> set[str]:
    """The client kinds a module makes (constructors, Spark's kafka format)."""
    kinds = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if (name := _name(node.func)) in CONSTRUCTORS:
                kinds.add(CONSTRUCTORS[name])
            args = [a.value for a in node.args if isinstance(a, ast.Constant)]
            if _name(node.func) == "option" and "kafka.bootstrap.servers" in args:
                kinds.add("spark")
        if isinstance(node, ast.Dict) and any(
                isinstance(k, ast.Constant) and k.value == "bootstrap.servers" for k in node.keys):
            kinds.add("confluent")
    return kinds


def _calls(tree: ast.AST) -> set[str]:
    return {n for node in ast.walk(tree) if isinstance(node, ast.Call)
            if (n := _name(node.func))}


def test_every_module_that_makes_a_client_translates_its_security():
    unsecured = []
    for path in _modules():
        rel = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text())
        calls = _calls(tree)
        for kind in _clients(tree):
            if not calls & TRANSLATORS[kind] and rel not in HANDED_IN:
                unsecured.append(f"{rel}: a {kind} client without "
                                 f"{' or '.join(sorted(TRANSLATORS[kind]))}")
    assert unsecured == []


def test_the_scan_finds_every_kind_of_client():
    """The scan itself: each kind is found where it is made (a scan finding nothing
    would pass the test above vacuously)."""
    found: dict[str, set[str]] = {}
    for path in _modules():
        for kind in _clients(ast.parse(path.read_text())):
            found.setdefault(kind, set()).add(path.relative_to(ROOT).as_posix())
    assert {"core/bus.py", "core/owner.py"} <= found["confluent"]
    assert found["kafka-python"] == {"core/live.py"}
    assert found["spark"] == {"streams/query.py"}
    assert found["kazoo"] == {"core/zk_session.py"}  # the collector, serve's lock, doctor
    assert "streams/collect/broker_metrics.py" in found["http"]


def test_every_admin_and_lock_the_product_opens_names_its_security():
    """open_admin and ZkLeadership default to an unsecured cluster (the sandbox and tests
    use that); the product must always say which section it connects with."""
    missing = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and _name(node.func) in ("open_admin", "ZkLeadership") \
                    and "security" not in {k.arg for k in node.keywords}:
                missing.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert missing == []


# --- and the factories really carry the settings ------------------------------------------
SECURED = {"SELFHEAL_CLUSTER_BOOTSTRAP_SERVERS": "127.0.0.1:1",
           "SELFHEAL_CLUSTER_SECURITY_PROTOCOL": "SASL_SSL",
           "SELFHEAL_CLUSTER_SECURITY_SASL_MECHANISM": "SCRAM-SHA-512",
           "SELFHEAL_CLUSTER_SECURITY_USERNAME": "selfheal",
           "SELFHEAL_CLUSTER_SECURITY_PASSWORD_FILE": "/nonexistent/kafka.password",
           "SELFHEAL_CLUSTER_ZOOKEEPER_SECURITY_SASL_MECHANISM": "DIGEST-MD5",
           "SELFHEAL_CLUSTER_ZOOKEEPER_SECURITY_USERNAME": "selfheal",
           "SELFHEAL_CLUSTER_ZOOKEEPER_SECURITY_PASSWORD_ENV": "NO_SUCH_VARIABLE_SET"}


@pytest.fixture
def secured():
    return load(env=SECURED, use_fallbacks=False)


def test_the_bus_clients_carry_the_section(secured, tmp_path):
    from core import bus

    good = tmp_path / "pw"
    good.write_text("pw")
    good.chmod(0o600)
    with pytest.raises(ConfigError, match="/nonexistent/kafka.password"):
        bus.client_config(secured)  # the bus is the cluster: its section
    config = load(env={**SECURED, "SELFHEAL_CLUSTER_SECURITY_PASSWORD_FILE": str(good)},
                  use_fallbacks=False)
    settings = bus.client_config(config)
    assert settings["sasl.mechanism"] == "SCRAM-SHA-512" and settings["sasl.password"] == "pw"


@pytest.mark.parametrize("opens", ["owner", "live", "zk_lock"])
def test_each_factory_reads_its_section_before_it_dials(secured, opens):
    """A factory that skipped its section would try to connect (and fail on the network);
    these fail on the section's missing secret first, so the section was read."""
    if opens == "owner":
        from core.owner import cluster_name

        with pytest.raises(ConfigError, match="/nonexistent/kafka.password"):
            cluster_name(secured)
    elif opens == "live":
        from core.live import open_admin

        with pytest.raises(ConfigError, match="/nonexistent/kafka.password"), \
                open_admin("127.0.0.1:1", security=secured.cluster_security):
            pass
    else:
        from remediation.executor.lock import leadership_for

        config = load(env={**SECURED, "SELFHEAL_CLUSTER_MODE": "zk",
                           "SELFHEAL_CLUSTER_ZOOKEEPER_CONNECT": "127.0.0.1:1"},
                      use_fallbacks=False)
        with pytest.raises(ConfigError, match="NO_SUCH_VARIABLE_SET is not set"):
            leadership_for(config, "me")
