"""The secured ZooKeeper-mode sandbox's files (sandbox/secure_zk.py), written and read
back without starting anything: ZooKeeper takes SASL sessions only, the brokers log in to
it and protect their znodes, the authorizer is ZooKeeper mode's, and every password is in
a file of mode 0600, never on a command line or in the state file."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from sandbox import cluster, grants, jvm, secure_zk


def _props(path: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in Path(path).read_text().splitlines() if line)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture()
def layout(tmp_path):
    return cluster.plan_layout(tmp_path, brokers=2, log_dirs=1, racks=0, mode="zk",
                               kafka="3.9", security="sasl_ssl")


def test_zookeeper_takes_sasl_digest_sessions_only_from_the_two_users(layout):
    assert layout.zookeeper is not None
    zk = _props(layout.zookeeper.config)
    assert zk["authProvider.1"].endswith("SASLAuthenticationProvider")
    assert zk["sessionRequireClientSASLAuth"] == "true"
    jaas = Path(layout.zookeeper.config).parent / "jaas.conf"
    assert _mode(jaas) == 0o600
    text = jaas.read_text()
    assert text.startswith("Server {") and "DigestLoginModule required" in text
    assert layout.security is not None
    for user in ("broker", "selfheal"):
        assert f'user_{user}="{layout.security.password(f"zookeeper-{user}")}"' in text


def test_each_broker_logs_in_to_zookeeper_protects_its_znodes_and_runs_the_acl_authorizer(
        layout):
    for broker in layout.brokers:
        props = _props(broker.config)
        assert props["zookeeper.set.acl"] == "true"
        assert props["authorizer.class.name"] == "kafka.security.authorizer.AclAuthorizer"
        assert props["allow.everyone.if.no.acl.found"] == "false"
        assert props["inter.broker.listener.name"] == "SASL_SSL"
        assert props["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
        jaas = Path(broker.config).parent / "jaas.conf"
        assert _mode(jaas) == 0o600 and jaas.read_text().startswith("Client {")
        assert 'username="broker"' in jaas.read_text()


def test_the_jvms_name_their_jaas_file_and_no_password_is_on_a_command_line(layout):
    assert layout.security is not None
    passwords = [layout.security.password(p) for p in layout.security.principals]
    passwords += list(secure_zk.passwords(layout.security).values())
    for server in layout.servers():
        cmd = jvm.server_command(layout, server)
        jaas = Path(server.config).parent / "jaas.conf"
        assert f"-Djava.security.auth.login.config={jaas}" in cmd
        assert not [p for p in passwords if any(p in arg for arg in cmd)]
    assert not [p for p in passwords if p in json.dumps(layout.to_dict())]
    for name in secure_zk.ZK_USERS:
        assert _mode(layout.security.password_file(f"zookeeper-{name}")) == 0o600


def test_the_product_configs_authenticate_to_zookeeper_in_zookeeper_mode_only(layout,
                                                                              tmp_path):
    section = grants.sections(layout, "selfheal-serve")["cluster.zookeeper_security"]
    assert section["sasl_mechanism"] == "DIGEST-MD5" and section["username"] == "selfheal"
    assert Path(section["password_file"]).read_text().strip() == \
        secure_zk.passwords(layout.security)["ZooKeeper password of selfheal"]
    options = secure_zk.kazoo_options(layout)
    assert options["sasl_options"]["username"] == "selfheal"
    kraft = cluster.plan_layout(tmp_path / "kraft", brokers=1, log_dirs=1, racks=0,
                                kafka="4.4", security="sasl_ssl")
    assert list(grants.sections(kraft, "selfheal-serve")) == ["cluster.security"]
    assert secure_zk.kazoo_options(kraft) == {}


def test_mutual_tls_in_zookeeper_mode_is_refused_in_one_line_before_anything_is_written(
        tmp_path):
    with pytest.raises(cluster.SandboxError) as err:
        cluster.plan_layout(tmp_path, 1, 1, 0, mode="zk", kafka="3.9", security="mtls")
    assert "\n" not in str(err.value) and "--security sasl_ssl" in str(err.value)
    assert not list(tmp_path.iterdir())
