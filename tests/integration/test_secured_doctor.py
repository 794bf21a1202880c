"""`selfheal doctor` on the secured sandbox (SASL_SSL, SCRAM-SHA-512, authorizer with no
allow-everyone): each process's own config passes; a wrong password and a CA that does
not sign the brokers fail in one line; each cluster ACL serve needs, revoked in turn, is
named, and granting it back passes again. The same revocation under a running collector
and under the executor's calls: one line naming the ACL, no retry storm, and work again
once it is granted back. No secret in any output."""

from __future__ import annotations

import re
import time

import pytest

from core.config import load
from sandbox import grants, traffic
from sandbox.pki import Authority
from sandbox.state import SandboxState
from tests.integration.collect_support import Collector
from tests.integration.secured_support import doctor, statuses

pytestmark = pytest.mark.integration


@pytest.fixture
def secured(secured_small_sandbox) -> SandboxState:
    return secured_small_sandbox  # shared with test_secured_sandbox.py (tests/conftest.py)


@pytest.mark.parametrize("principal,process", [("selfheal-serve", "serve"),
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
    assert len(probes) == (4 if process == "serve" else 1)


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


def _config_of(state: SandboxState, principal: str):
    security = state.security
    assert security is not None
    return load(grants.config_file(security, principal),
                env={"SELFHEAL_SANDBOX_DIR": state.work_dir})


def _cluster_acl(principal: str, operation: str):
    (acl,) = [a for a in grants.acls_of(principal)
              if a.resource == "Cluster" and a.operation == operation and a.on == "cluster"]
    return grants.binding(principal, acl)


def _delays(lines: list[str]) -> list[float]:
    return [float(re.search(r"retrying in ([0-9.]+) s", x).group(1)) for x in lines]


def test_a_running_collector_names_a_revoked_acl_backs_off_and_recovers(secured):
    from core.bus import ensure_topics

    security = secured.security
    assert security is not None
    ensure_topics(_config_of(secured, "selfheal-serve"))  # serve's Create; not the collector's
    env = {"SELFHEAL_CONFIG": str(grants.config_file(security, "selfheal-collect"))}
    describe = _cluster_acl("selfheal-collect", "Describe")
    collector = Collector(secured, ["snapshots", "--interval", "1", "--probe-interval", "1"],
                          env)
    try:
        collector.wait_for_line(r"snapshot \(start-up\)", timeout=120)
        revoked_at = collector.line_count()
        grants.revoke(secured, [describe])
        try:
            # four denied snapshots: 1 + 2 + 4 s of backoff between them
            denied = r"ERROR snapshot failed: DescribeLogDirs denied"
            deadline = time.monotonic() + 120
            while len(lines := [x for x in collector.text().splitlines()[revoked_at:]
                                if re.search(denied, x)]) < 4:
                assert collector.proc.poll() is None, collector.text()
                assert time.monotonic() < deadline, collector.text()
                time.sleep(0.5)
        finally:
            granted_at = collector.line_count()
            grants.grant(secured, [describe])
        line = lines[0]
        assert ("User:selfheal-collect needs Describe on Cluster; add it: kafka-acls.sh "
                in line and "--allow-principal User:selfheal-collect --operation Describe "
                "--cluster" in line), line
        # each attempt waits twice the last: the probe backs off the same way
        assert _delays(lines[:4]) == [1.0, 2.0, 4.0, 8.0]
        probes = [x for x in collector.text().splitlines()[revoked_at:granted_at]
                  if "ERROR log-dir probe failed" in x]
        assert probes and all("DescribeLogDirs denied" in x for x in probes)
        assert _delays(probes) == [2.0 ** n for n in range(len(probes))]
        assert not [x for x in collector.text().splitlines()[revoked_at:granted_at]
                    if "ERROR" in x and "denied" not in x]
        assert collector.proc.poll() is None  # it stayed up
        collector.wait_for_line(r"snapshot \(interval\)", timeout=120, after=granted_at)
    finally:
        assert collector.stop() == 0
    text = collector.text()
    assert not [n for n, s in security.secrets().items() if s in text]


def test_the_executor_names_a_revoked_alter_and_moves_once_it_is_granted_back(secured):
    from core.live import open_admin
    from remediation.executor.cluster import ClusterError, KafkaCluster

    topic = "secured-executor-denied"
    traffic.create_topic(secured, topic, partitions=1, replication_factor=1)
    config = _config_of(secured, "selfheal-serve")
    alter = _cluster_acl("selfheal-serve", "Alter")
    with open_admin(config.cluster.bootstrap_servers, security=config.cluster_security) \
            as admin:
        executor = KafkaCluster(admin)
        view = executor.read(topics=[topic])
        (partition,) = view.model.partitions
        (replica,) = partition.replicas
        other = min(view.model.alive - {replica.broker})

        def alter_allowed() -> bool:  # the doctor's probe: an empty call moves nothing
            try:
                admin.alter_partition_reassignments({})
            except Exception:  # noqa: BLE001 - the denial
                return False
            return True

        def until(allowed: bool) -> None:  # an ACL reaches every broker a moment later
            deadline = time.monotonic() + 60
            while alter_allowed() != allowed:
                assert time.monotonic() < deadline, f"Alter allowed is not {allowed}"
                time.sleep(1)

        grants.revoke(secured, [alter])
        try:
            until(False)
            with pytest.raises(ClusterError) as denied:
                executor.reassign({(topic, 0): [other]})
        finally:
            grants.grant(secured, [alter])
        assert str(denied.value).startswith("AlterPartitionReassignments denied: "
                                            "User:selfheal-serve needs Alter on Cluster")
        assert executor.reassignments() == {}  # nothing was started
        until(True)
        assert executor.reassign({(topic, 0): [other]}) == {}


def test_the_exporters_answer_only_https_with_the_scrape_password(secured, tmp_path):
    """The doctor passes every exporter for the metrics collector's config; with a wrong
    password each fails in one line naming the setting, and so does the collector's scrape
    (no hint about the agent, which runs)."""
    from core.bus import ensure_topics

    security = secured.security
    assert security is not None
    checks = statuses(doctor(secured, "selfheal-collect", "--json", "--process",
                             "collect-metrics"))
    exporters = {n: c for n, c in checks.items() if n.startswith("exporter ")}
    assert sorted(exporters) == sorted(f"exporter {b.exporter_url}" for b in secured.brokers)
    assert all(n.startswith("exporter https://") and c["status"] == "ok"
               for n, c in exporters.items()), exporters
    wrong = tmp_path / "wrong.password"
    wrong.write_text("not-the-password\n")
    wrong.chmod(0o600)
    out = doctor(secured, "selfheal-collect", "--process", "collect-metrics",
                 SELFHEAL_CLUSTER_EXPORTER_SECURITY_PASSWORD_FILE=str(wrong))
    assert out.returncode == 1
    failed = [x for x in out.stdout.splitlines() if x.startswith("FAIL exporter https://")]
    assert len(failed) == len(secured.brokers), out.stdout
    assert all(x.endswith(": HTTP 401 Unauthorized -> check [cluster.exporter_security] "
                          "username and password") for x in failed), failed
    ensure_topics(_config_of(secured, "selfheal-serve"))
    config = {"SELFHEAL_CONFIG": str(grants.config_file(security, "selfheal-collect"))}
    with Collector(secured, ["metrics", "--once"], config) as good:
        assert good.proc.wait(timeout=120) == 0, good.text()
        assert f"{len(secured.brokers)} of {len(secured.brokers)} exporters scraped" \
            in good.text()
    with Collector(secured, ["metrics", "--once"], {
            **config, "SELFHEAL_CLUSTER_EXPORTER_SECURITY_PASSWORD_FILE": str(wrong)}) as bad:
        assert bad.proc.wait(timeout=120) == 1
        lines = [x for x in bad.text().splitlines() if "ERROR exporter" in x]
        assert len(lines) == len(secured.brokers), bad.text()
        assert all("HTTP 401 Unauthorized; check [cluster.exporter_security] username and "
                   "password; retrying" in x for x in lines), lines
    for text in (good.text(), bad.text()):
        assert not [n for n, s in security.secrets().items() if s in text]
