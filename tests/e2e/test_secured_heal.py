"""The whole-loop heal on a secured Kafka 4.4 KRaft sandbox (SASL_SSL, SCRAM-SHA-512,
StandardAuthorizer with no allow-everyone): each piece runs as its own principal with
only its rows of core/acls.py; a dir fails under traffic, the fix is proposed, approved
and healed, every acknowledged message is read once (heal_matrix.py), and no secret of
the sandbox is in any process log, any record on the bus or any API answer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sandbox.state import SandboxState
from tests.e2e.heal_matrix import secured_heal
from tests.integration.secured_support import secured_sandbox

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Iterator[SandboxState]:
    with secured_sandbox(tmp_path_factory, "secured-heal", brokers=3, log_dirs=2,
                         racks=3) as state:
        yield state


def test_a_failed_disk_is_healed_with_each_piece_on_its_own_acls(secured, tmp_path_factory,
                                                                 record_property) -> None:
    secured_heal(secured, tmp_path_factory.mktemp("secured-loop"), record_property)
