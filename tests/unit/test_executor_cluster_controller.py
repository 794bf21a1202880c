"""The executor's admin calls forget a controller that failed them: kafka-python's admin
keeps the first controller it found and, for a controller that has died since, fails
every later call with UnknownBrokerIdError unless it is made to look again."""

from __future__ import annotations

import pytest

from remediation.executor.cluster import ClusterError, KafkaCluster


class UnknownBrokerIdError(Exception):
    pass


class Admin:
    """Answers like kafka-python's admin: routes to `_controller_id`, found on demand."""

    def __init__(self) -> None:
        self._controller_id: int | None = 1  # found before broker 1 died
        self.alive = {0, 3}
        self.lookups = 0

    def list_partition_reassignments(self) -> dict:
        if self._controller_id is None:
            self.lookups += 1
            self._controller_id = 0  # the controller the cluster elected since
        if self._controller_id not in self.alive:
            raise UnknownBrokerIdError(self._controller_id)
        return {}


def test_a_dead_controller_is_looked_up_again_on_the_next_call() -> None:
    admin = Admin()
    cluster = KafkaCluster(admin)
    with pytest.raises(ClusterError, match="ListPartitionReassignments failed: "
                                           "UnknownBrokerIdError"):
        cluster.reassignments()
    assert admin._controller_id is None
    assert cluster.reassignments() == {}  # the executor's next step
    assert admin.lookups == 1 and admin._controller_id == 0
