"""The chaos suite's report: each scenario's timings travel with its test's report (to
the xdist controller too) and `make test` prints them at the end (tests/conftest.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from sandbox import cluster
from sandbox.state import SandboxState
from tests.chaos import chaos_support
from tests.conftest import prove


@pytest.fixture(scope="session")
def chaos_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxState]:
    """The default Kafka line (4.4, KRaft), 3 brokers x 2 log dirs over 3 racks, for every
    scenario not about ZooKeeper (those run on the 3.9 ZooKeeper `sandbox`)."""
    state = cluster.up(tmp_path_factory.mktemp("sandbox-chaos"),
                       progress=lambda m: print(f"[sandbox] {m}", file=sys.stderr))
    try:
        yield state
    finally:
        cluster.down(state.reload())


@pytest.fixture(autouse=True)
def _report_scenario_timings(request: pytest.FixtureRequest) -> Iterator[None]:
    chaos_support.REPORTED.clear()
    chaos_support.RAN_ON.clear()
    yield
    for name, timings in chaos_support.REPORTED:
        request.node.user_properties.append(("figures", {"what": f"chaos {name}", **timings}))
    def record(key: str, value: object) -> None:
        request.node.user_properties.append((key, value))

    for state in {(s.kafka, s.mode): s for s in chaos_support.RAN_ON}.values():
        prove(record, state, "chaos")
    chaos_support.REPORTED.clear()
    chaos_support.RAN_ON.clear()
