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
