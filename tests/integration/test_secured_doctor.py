"""`selfheal doctor` on the secured sandbox (SASL_SSL, SCRAM-SHA-512, authorizer with no
allow-everyone): each process's own config passes; a wrong password and a CA that does
not sign the brokers fail in one line; each cluster ACL serve needs, revoked in turn, is
named, and granting it back passes again. No secret in any output."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from sandbox import grants
from sandbox.pki import Authority
from sandbox.state import SandboxState
from tests.integration.secured_support import doctor, secured_sandbox, statuses

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Iterator[SandboxState]:
    with secured_sandbox(tmp_path_factory, "secured-doctor", brokers=2, log_dirs=1,
                         racks=2) as state:
        yield state


@pytest.mark.parametrize("principal,process", [("selfheal-serve", None),
                                               ("selfheal-collect", "collect-snapshots"),
                                               ("selfheal-airflow", "airflow")])
def test_each_process_config_passes_the_doctor(secured, principal, process):
    out = doctor(secured, principal, "--json", *(["--process", process] if process else []))
    checks = statuses(out)
    assert out.returncode == 0, out.stdout
    assert checks["cluster"]["status"] == "ok"
    assert "SCRAM-SHA-512 user " + principal in checks["cluster"]["detail"]
    probes = [c for name, c in checks.items() if name.startswith("acl ")]
    assert probes and all(c["status"] == "ok" for c in probes)
    assert len(probes) == (4 if process is None else 1)


def test_the_collector_is_told_it_may_not_alter_the_cluster(secured):
    out = doctor(secured, "selfheal-collect")
    assert out.returncode == 1
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("FAIL acl Alter on Cluster")]
    assert "denied" in line and "--operation Alter --cluster" in line


def test_a_wrong_password_fails_in_one_line(secured, tmp_path):
    wrong = tmp_path / "wrong.password"
    wrong.write_text("not-the-password\n")
    wrong.chmod(0o600)
    out = doctor(secured, "selfheal-serve", SELFHEAL_CLUSTER_SECURITY_PASSWORD_FILE=str(wrong))
    assert out.returncode == 1
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("FAIL cluster")]
    assert "-> check [cluster.security] username and password" in line


def test_a_ca_that_does_not_sign_the_brokers_fails_in_one_line(secured, tmp_path):
    other = Authority(tmp_path / "other", "another CA")
    out = doctor(secured, "selfheal-serve", SELFHEAL_CLUSTER_SECURITY_SSL_CA_FILE=str(other.cert))
    assert out.returncode == 1
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("FAIL cluster")]
    assert "ssl_ca_file" in line


def _until(state: SandboxState, wanted: str, name: str) -> dict[str, str]:
    """The doctor's check ``name`` once it reads ``wanted`` (an ACL change reaches every
    broker through the metadata log, a moment after the call returns)."""
    deadline = time.monotonic() + 60
    while True:
        check = statuses(doctor(state, "selfheal-serve", "--json"))[name]
        if check["status"] == wanted or time.monotonic() > deadline:
            return check
        time.sleep(1)


@pytest.mark.parametrize("operation,probe", [
    ("Describe", "acl Describe on Cluster (DescribeLogDirs)"),
    ("Alter", "acl Alter on Cluster (reassignments, log-dir moves, elections)"),
    ("DescribeConfigs", "acl DescribeConfigs on Cluster (throttles)"),
])
def test_each_revoked_cluster_acl_is_named_and_granting_it_back_passes(secured, operation,
                                                                       probe):
    # Kafka's implied operations: Alter grants Describe, AlterConfigs DescribeConfigs; so
    # the row is revoked with the one that implies it.
    implied_by = {"Describe": "Alter", "DescribeConfigs": "AlterConfigs"}
    ops = {operation, implied_by.get(operation, operation)}
    bindings = [grants.binding("selfheal-serve", a) for a in grants.acls_of("selfheal-serve")
                if a.resource == "Cluster" and a.operation in ops and a.on == "cluster"]
    assert len(bindings) == len(ops)
    grants.revoke(secured, bindings)
    try:
        check = _until(secured, "fail", probe)
        assert check["status"] == "fail", check
        assert operation in check["fix"] and "Cluster" in check["fix"]
    finally:
        grants.grant(secured, bindings)
    assert _until(secured, "ok", probe)["status"] == "ok"
