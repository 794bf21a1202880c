"""The secured sandbox (`selfheal sandbox up --security sasl_ssl`): TLS and SCRAM on every
client connection, an authorizer that allows only what ACLs grant. A client with the
wrong password or without the CA gets nothing; a product principal with no ACLs sees no
topics; and no secret is in any log the sandbox's servers wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox import cluster, grants, secure, traffic
from sandbox.state import SandboxState

pytestmark = pytest.mark.integration


@pytest.fixture
def secured(secured_small_sandbox) -> SandboxState:
    return secured_small_sandbox  # shared with test_secured_doctor.py (tests/conftest.py)


def _topics(state: SandboxState, settings: dict[str, object]) -> set[str]:
    """The topics ``settings`` may see; what librdkafka said, as the exception, if none."""
    from confluent_kafka.admin import AdminClient

    said: list[str] = []
    admin = AdminClient({"bootstrap.servers": state.bootstrap_servers,
                         "socket.timeout.ms": 5000, "log_level": 0,
                         "error_cb": lambda err: said.append(err.name()), **settings})
    try:
        return set(admin.list_topics(timeout=10).topics)
    except Exception as exc:
        admin.poll(1)  # serves the error callbacks
        raise AssertionError(f"no metadata ({exc}); librdkafka said {said}") from None


def test_the_admin_reaches_the_cluster_over_tls_and_scram(secured):
    traffic.create_topic(secured, "secured-one", partitions=1, replication_factor=2)
    assert "secured-one" in _topics(secured, cluster.client_config(secured))


def test_a_wrong_password_or_no_tls_reaches_nothing(secured):
    security = secured.security
    wrong = {**secure.client_settings(security, secure.ADMIN), "sasl.password": "not-it"}
    with pytest.raises(AssertionError, match="_AUTHENTICATION"):
        _topics(secured, wrong)
    without_ca = {k: v for k, v in secure.client_settings(security, secure.ADMIN).items()
                  if k != "ssl.ca.location"}  # the system's CAs do not sign the broker
    with pytest.raises(AssertionError, match="_SSL|_TRANSPORT"):
        _topics(secured, without_ca)
    with pytest.raises(AssertionError):  # a plaintext client on a TLS listener
        _topics(secured, {})


def test_a_product_principal_sees_only_the_topics_its_acls_name(secured):
    traffic.create_topic(secured, "secured-two", partitions=1, replication_factor=2)
    stream = _topics(secured, secure.client_settings(secured.security, "selfheal-stream"))
    assert "secured-two" not in stream  # Read on the selfheal.* prefix only
    assert all(t.startswith("selfheal.") for t in stream)
    # the collector describes every topic (the snapshot holds them all)
    assert "secured-two" in _topics(secured, secure.client_settings(secured.security,
                                                                   "selfheal-collect"))


def test_each_product_principal_holds_exactly_its_rows_of_the_acl_table(secured):
    for principal in sorted(set(grants.PRINCIPAL.values())):
        held = {(b.restype.name, b.name, b.resource_pattern_type.name, b.operation.name)
                for b in grants.granted(secured, principal)}
        wanted = {(b.restype.name, b.name, b.resource_pattern_type.name, b.operation.name)
                  for b in (grants.binding(principal, a) for a in grants.acls_of(principal))}
        assert held == wanted, principal


def test_no_password_is_in_any_file_the_servers_wrote(secured):
    security = secured.security
    passwords = list(security.secrets().values())
    # the exporters' file holds a salted hash of the scrape password, never the password
    assert security.password("selfheal-scrape") not in security.exporter_config().read_text()
    assert security.exporter_config().stat().st_mode & 0o077 == 0
    for server in secured.servers():
        folder = Path(server.config).parent
        for log in [*folder.glob("*.log"), *folder.glob("*.log.*")]:
            text = log.read_text(errors="replace")
            leaked = [p for p in passwords if p in text]
            assert not leaked, f"{log} holds a password"
    for path in Path(security.folder).glob("*.password"):
        assert path.stat().st_mode & 0o077 == 0, f"{path} is readable by others"
    for broker in secured.brokers:
        assert Path(broker.config).stat().st_mode & 0o077 == 0
