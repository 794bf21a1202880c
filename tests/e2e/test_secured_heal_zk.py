"""The whole-loop heal on a secured Kafka 3.9 sandbox in ZooKeeper mode: SASL_SSL with
SCRAM-SHA-512, AclAuthorizer with no allow-everyone, and ZooKeeper taking SASL
DIGEST-MD5 sessions only (sandbox/secure_zk.py). ZooKeeper closes a session without
credentials and refuses a wrong password: the doctor says each in one line, serve's lock
the second; with the sandbox's [cluster.zookeeper_security] the collector watches and
serve holds its lock; a dir fails under traffic and is healed (heal_matrix.py) with no
secret in any output."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sandbox import grants, secure_zk
from sandbox.loop import render_toml
from sandbox.state import SandboxState
from tests.e2e.heal_matrix import secured_heal
from tests.integration.secured_support import doctor, secured_sandbox

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def secured_zk(tmp_path_factory) -> Iterator[SandboxState]:
    with secured_sandbox(tmp_path_factory, "secured-heal-zk", kafka="3.9", mode="zk",
                         brokers=3, log_dirs=2, racks=3) as state:
        yield state


def test_zookeeper_closes_a_session_without_sasl_and_hides_the_scram_credentials(
        secured_zk) -> None:
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError, SessionClosedRequireSaslError

    anonymous = KazooClient(hosts=secured_zk.zookeeper_connect)
    anonymous.start(timeout=15)
    try:
        with pytest.raises(SessionClosedRequireSaslError):
            anonymous.get_children_async("/brokers/ids").get(timeout=15)
    finally:
        anonymous.stop()
        anonymous.close()
    product = KazooClient(hosts=secured_zk.zookeeper_connect,
                          **secure_zk.kazoo_options(secured_zk))
    product.start(timeout=15)
    try:
        assert sorted(product.get_children("/brokers/ids")) == ["0", "1", "2"]
        with pytest.raises(NoAuthError):  # the brokers' znodes: `sasl:broker` only
            product.get("/config/users/broker")
    finally:
        product.stop()
        product.close()


def test_the_doctor_says_in_one_line_that_zookeeper_wants_sasl(secured_zk, tmp_path) -> None:
    security = secured_zk.security
    assert security is not None
    without = tmp_path / "no-zookeeper-security.toml"
    without.write_text(render_toml({}, {"cluster.security": grants.security_section(
        security, "selfheal-serve")}))
    out = doctor(secured_zk, "selfheal-serve", config=without)
    assert out.returncode == 1
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("FAIL zookeeper:")]
    assert "SASL-authenticated sessions only" in line
    assert "-> set [cluster.zookeeper_security]" in line

    # A wrong password: ZooKeeper refuses the login; one line, no traceback from kazoo's
    # connection thread.
    wrong = tmp_path / "wrong-zookeeper.password"
    wrong.write_text("not-the-password")
    wrong.chmod(0o600)
    zk_section = {**secure_zk.zookeeper_security(security), "password_file": str(wrong)}
    bad = tmp_path / "wrong-zookeeper-password.toml"
    bad.write_text(render_toml({}, {
        "cluster.security": grants.security_section(security, "selfheal-serve"),
        "cluster.zookeeper_security": zk_section}))
    out = doctor(secured_zk, "selfheal-serve", config=bad)
    assert out.returncode == 1
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("FAIL zookeeper:")]
    assert f"refused the SASL login of '{secure_zk.PRODUCT_USER}'" in line, line
    assert "-> check [cluster.zookeeper_security] username and password_file" in line, line
    assert "Traceback" not in out.stderr and "zk_loop" not in out.stderr, out.stderr

    out = doctor(secured_zk, "selfheal-serve", "--process", "serve")  # no exporters
    assert out.returncode == 0, out.stdout
    (line,) = [x for x in out.stdout.splitlines() if x.split()[1:2] == ["zookeeper:"]]
    assert line.startswith("ok ") and "3 brokers registered" in line


def test_serve_s_lock_says_in_one_line_that_zookeeper_refused_the_login(secured_zk,
                                                                        tmp_path) -> None:
    from core.security import ZooKeeperSecurity
    from remediation.executor.lock import LockError, ZkLeadership

    wrong = tmp_path / "wrong-zookeeper.password"
    wrong.write_text("not-the-password")
    wrong.chmod(0o600)
    security = ZooKeeperSecurity(sasl_mechanism="DIGEST-MD5", username=secure_zk.PRODUCT_USER,
                                 password_file=wrong)
    hosts = secured_zk.zookeeper_connect
    assert hosts is not None
    with pytest.raises(LockError) as refused:
        ZkLeadership(hosts, secured_zk.cluster_id, "serve-1", security=security)
    assert str(refused.value) == (
        f"the executor lock: ZooKeeper at {hosts} refused the SASL login of "
        f"'{secure_zk.PRODUCT_USER}': check [cluster.zookeeper_security] username and "
        "password_file")


def test_a_failed_disk_is_healed_with_zookeeper_sasl_and_each_piece_on_its_own_acls(
        secured_zk, tmp_path_factory, record_property) -> None:
    secured_heal(secured_zk, tmp_path_factory.mktemp("secured-zk-loop"), record_property)
