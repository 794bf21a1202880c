"""serve's intake replaces a consumer that stopped fetching while records wait
(librdkafka #5153: an assigned consumer after every broker restarted), and reads on from
the group's committed offsets. The stall cannot be brought about on demand, so the
consumer is a stand-in; tests/chaos/test_outages.py restarts every broker of a real bus."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from remediation.executor.cluster import ClusterError
from remediation.service.intake import STALL_SECONDS, Intake
from tests.unit.test_serve_intake_assign import _Consumer


class _Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


class _Stuck(_Consumer):
    """Assigned, never delivers, while each partition's log ends at ``ends``; or delivers
    ``held`` again and again (a record the executor keeps waiting on)."""

    def __init__(self, ends: dict[int, int], committed: dict[int, int],
                 held: Any = None) -> None:
        super().__init__([len(ends)], committed=committed)
        self.ends, self.held, self.closed = ends, held, False

    def get_watermark_offsets(self, tp: Any, timeout: float,
                              cached: bool = False) -> tuple[int, int]:
        return 0, self.ends[tp.partition]

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        return [self.held] if self.held is not None else []

    def seek(self, tp: Any) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def _intake(first: _Stuck, clock: _Clock, made: list[_Stuck], log: list[str]) -> Intake:
    def renew() -> _Stuck:
        made.append(_Stuck(first.ends, first.offsets))
        return made[-1]

    def receive(value: bytes, source: str) -> Any:
        raise ClusterError("the cluster is away")

    return Intake(first, "p.actions", SimpleNamespace(receive=receive),  # type: ignore[arg-type]
                  log=log.append, renew=renew, clock=clock)


def test_a_stalled_intake_reads_on_with_a_new_consumer_from_the_committed_offsets():
    clock, made, log = _Clock(), [], []
    first = _Stuck({0: 9, 1: 5}, committed={0: 7, 1: 5})
    intake = _intake(first, clock, made, log)
    stop = threading.Event()
    clock.now += STALL_SECONDS - 1
    intake.poll(0.0, stop)
    assert made == []  # not yet
    clock.now += 2
    intake.poll(0.0, stop)
    assert first.closed and len(made) == 1 and intake.consumer is made[0]
    assert made[0].assigned == [("p.actions", 0, 7), ("p.actions", 1, 5)]
    assert "the intake stopped fetching (nothing read for 16 s with p.actions-0 at 7 of 9" \
        in log[-1]


def test_an_intake_at_the_end_of_the_log_is_not_stalled():
    clock, made, log = _Clock(), [], []
    intake = _intake(_Stuck({0: 7, 1: 5}, committed={0: 7, 1: 5}), clock, made, log)
    for _ in range(5):
        clock.now += STALL_SECONDS + 1
        intake.poll(0.0, threading.Event())
    assert made == [] and log == []


def test_a_record_held_back_for_the_cluster_is_fetching_not_a_stall():
    clock, made, log = _Clock(), [], []
    held = SimpleNamespace(error=lambda: None, topic=lambda: "p.actions",
                           partition=lambda: 0, offset=lambda: 7, value=lambda: b"{}")
    intake = _intake(_Stuck({0: 9, 1: 5}, committed={0: 7, 1: 5}, held=held), clock, made,
                     log)
    stop = threading.Event()
    for _ in range(5):
        clock.now += STALL_SECONDS + 1
        intake.poll(0.0, stop)
    assert made == []
    assert log == ["p.actions[0]@7: the cluster is away; the record waits until the "
                   "cluster answers"]
