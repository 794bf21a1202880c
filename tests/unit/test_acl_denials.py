"""An authorization failure anywhere is one line naming the call, the ACL it needs, the
principal and the command that adds it (issue 31, "denied is never empty")."""

from __future__ import annotations

import pytest
from kafka.errors import ClusterAuthorizationFailedError, NotControllerError

from core.acls import denial
from core.live import LogDirsDenied, describe_dirs
from core.security import KafkaSecurity
from remediation.executor.cluster import ClusterError, KafkaCluster

SCRAM = KafkaSecurity(protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                      username="selfheal-serve", password_env="UNUSED")


class Denied:
    """Answers like kafka-python's admin for a principal with no cluster ACLs."""

    selfheal_security = SCRAM

    def describe_log_dirs(self, brokers):
        return [{"broker": brokers[0], "log_dirs": []}]

    def alter_partition_reassignments(self, targets):
        raise ClusterAuthorizationFailedError("Cluster authorization failed.")


def test_a_denied_describe_log_dirs_names_the_acl_and_the_principal():
    with pytest.raises(LogDirsDenied) as err:
        describe_dirs(Denied(), 3)
    line = denial(err.value, SCRAM)
    assert line is not None and "\n" not in line
    assert line.startswith("DescribeLogDirs denied: User:selfheal-serve needs Describe on "
                           "Cluster")
    assert "--allow-principal User:selfheal-serve --operation Describe --cluster" in line


def test_the_executor_says_which_acl_a_denied_call_needs():
    with pytest.raises(ClusterError) as err:
        KafkaCluster(Denied()).reassign({("t", 0): [1, 2]})
    assert str(err.value).startswith("AlterPartitionReassignments denied: "
                                     "User:selfheal-serve needs Alter on Cluster")


def test_a_failure_that_is_no_denial_is_left_to_its_own_words():
    assert denial(NotControllerError("moved"), SCRAM, "AlterPartitionReassignments") is None
    assert denial(OSError("connection refused"), SCRAM) is None


def test_a_certificate_principal_is_named_by_its_file(tmp_path):
    cert = tmp_path / "serve.pem"
    mtls = KafkaSecurity(protocol="SSL", ssl_cert_file=cert, ssl_key_file=cert)
    line = denial(ClusterAuthorizationFailedError(), mtls, "ElectLeaders")
    assert line is not None and f"User:<the subject of {cert}> needs Alter on Cluster" in line


def test_serve_backs_off_a_denied_call_says_it_once_and_starts_once_granted(
        tmp_path, monkeypatch):
    """Alter on Cluster revoked while a fix is approved: serve's executor asks again after
    1, 2, 4 s (not every 1 s tick), logs the denial once, never asks for new clients (the
    cluster answers), and starts the fix on its own once the ACL is back."""
    from core.signing import ActionSigner
    from remediation.executor import runner
    from remediation.executor.lifecycle import State
    from remediation.executor.policy import Policy
    from remediation.executor.runner import Executor
    from remediation.executor.store import ActionStore
    from tests.unit.test_executor_checks import BROKEN, cluster, fix
    from tests.unit.test_executor_midway import Cluster

    class Revoked(Cluster):
        granted = False
        asked = 0

        def reassign(self, targets):
            self.asked += 1
            if not self.granted:
                with pytest.raises(ClusterError) as denied:  # worded as KafkaCluster does
                    KafkaCluster(Denied()).reassign(targets)
                raise denied.value
            return super().reassign(targets)

    now = [1000.0]
    monkeypatch.setattr(runner.time, "monotonic", lambda: now[0])
    action = fix([1, 4])
    store = ActionStore(tmp_path / "actions.db")
    store.propose(action)
    store.transition(action.action_id, State.APPROVED, "test", "approved for the test")
    kafka = Revoked(cluster(BROKEN, offline=(3,)))
    said: list[str] = []
    executor = Executor(store, kafka, Policy(), signer=ActionSigner("k"),  # type: ignore[arg-type]
                        log=said.append)
    for _ in range(8):  # 8 ticks of 1 s: asked at 0, 1, 3 and 7 s
        executor.tick()
        now[0] += 1.0
    assert kafka.asked == 4
    assert executor.failing_since is None
    assert len(said) == 1 and said[0].startswith(
        "AlterPartitionReassignments denied: User:selfheal-serve needs Alter on Cluster")
    assert "asking again in 1 s" in said[0]
    kafka.granted = True
    now[0] += 8.0
    executor.tick()
    assert ("reassign", {("t", 0): [1, 4]}) in kafka.calls
    assert store.get(action.action_id).state is State.EXECUTING  # type: ignore[union-attr]


def test_a_collector_denied_the_bus_topics_names_create_on_cluster_for_its_bus_user():
    from confluent_kafka import KafkaError, KafkaException

    from core.bus import BusError
    from core.config import load
    from streams.collect.runner import CollectError, CollectorRun

    config = load(env={"SELFHEAL_CLUSTER_BOOTSTRAP_SERVERS": "127.0.0.1:9",
                       "SELFHEAL_CLUSTER_SECURITY_PROTOCOL": "SASL_SSL",
                       "SELFHEAL_CLUSTER_SECURITY_SASL_MECHANISM": "SCRAM-SHA-512",
                       "SELFHEAL_CLUSTER_SECURITY_USERNAME": "selfheal-collect",
                       "SELFHEAL_CLUSTER_SECURITY_PASSWORD_ENV": "UNUSED"},
                  use_fallbacks=False)

    def create() -> None:
        refused = KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))
        raise BusError(f"cannot create topic selfheal.actions: {refused}") from refused

    run = CollectorRun("snapshots", config, 0, once=True)
    with pytest.raises(CollectError) as err:
        run.retry("setting up the topics", create, "check the bus", call="CreateTopics")
    assert str(err.value) == (
        "setting up the topics failed: CreateTopics denied: User:selfheal-collect needs "
        "Create on Cluster; add it: kafka-acls.sh --bootstrap-server <brokers> --add "
        "--allow-principal User:selfheal-collect --operation Create --cluster "
        "(docs/security.md)")
