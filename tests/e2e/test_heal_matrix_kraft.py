"""The whole-loop heal on Kafka 4.4, KRaft only (heal_matrix.py)."""

from __future__ import annotations

import pytest

from tests.e2e.heal_matrix import heal_under_traffic

pytestmark = pytest.mark.e2e


def test_a_failed_disk_under_traffic_is_healed_on_4_4(kraft_sandbox, tmp_path_factory,
                                                       record_property) -> None:
    heal_under_traffic(kraft_sandbox, tmp_path_factory.mktemp("heal-4.4"), record_property)
