"""A batch's actions sent once across its runs (streams/replay.py): the ledger beside the
detector's state says what an earlier run of the batch produced; the state's commit, or
else the bus, says which of those were acknowledged."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

from streams.replay import LOOK_BACK_MS, SentLedger


def acts(*ids):
    return [SimpleNamespace(action_id=i) for i in ids]


def ids(actions):
    return [a.action_id for a in actions]


class Bus:
    """The actions topic as the lookup sees it: the ids acknowledged so far; each question
    kept."""

    def __init__(self, *acked):
        self.acked = set(acked)
        self.asked: list[tuple[set[str], int]] = []

    def __call__(self, wanted, since_ms):
        self.asked.append((set(wanted), since_ms))
        return wanted & self.acked


def test_a_first_run_sends_everything_and_asks_the_bus_nothing(tmp_path):
    bus = Bus()
    ledger = SentLedger(tmp_path, bus)
    assert ledger.begin(3) == set()
    assert ids(ledger.unsent(3, acts("a", "b"))) == ["a", "b"]
    assert ids(ledger.unsent(3, acts("c"))) == ["c"]  # the batch's second part
    assert bus.asked == []
    doc = json.loads((tmp_path / "3.sent").read_text())
    assert doc["ids"] == ["a", "b", "c"]
    assert abs(doc["since_ms"] - time.time() * 1000) < 60_000


def test_a_run_again_after_a_death_before_the_commit_sends_only_what_the_bus_lacks(tmp_path):
    # the earlier run recorded a, b, c; the bus acknowledged a and b, then the job died
    SentLedger(tmp_path, Bus()).unsent(3, acts("a", "b", "c"))
    since = json.loads((tmp_path / "3.sent").read_text())["since_ms"]
    bus = Bus("a", "b", "x")
    again = SentLedger(tmp_path, bus)
    assert again.begin(3) == {"a", "b"}
    assert bus.asked == [({"a", "b", "c"}, since - LOOK_BACK_MS)]
    # the same plans, and one the earlier run did not make (its evidence changed)
    assert ids(again.unsent(3, acts("a", "b", "c", "d"))) == ["c", "d"]
    assert json.loads((tmp_path / "3.sent").read_text())["ids"] == ["a", "b", "c", "d"]


def test_a_run_again_after_the_state_was_committed_sends_nothing_and_asks_no_bus(tmp_path):
    SentLedger(tmp_path, Bus()).unsent(3, acts("a", "b"))
    (tmp_path / "3.json").write_text("{}")  # the state committed, Spark's commit lost
    bus = Bus()
    again = SentLedger(tmp_path, bus)
    assert again.begin(3) == {"a", "b"}
    assert ids(again.unsent(3, acts("a", "b"))) == []
    assert bus.asked == []


def test_each_run_in_one_process_asks_afresh(tmp_path):
    # a query restarted in the same driver runs the batch again: what the first run sent
    # must not be forgotten because the ledger object is the same
    bus = Bus()
    ledger = SentLedger(tmp_path, bus)
    ledger.begin(7)
    assert ids(ledger.unsent(7, acts("a"))) == ["a"]
    bus.acked.add("a")
    assert ledger.begin(7) == {"a"}
    assert ids(ledger.unsent(7, acts("a", "b"))) == ["b"]


def test_a_batch_without_its_own_ledger_sends_all_though_an_older_ledger_exists(tmp_path):
    SentLedger(tmp_path, Bus()).unsent(3, acts("a"))
    ledger = SentLedger(tmp_path, Bus("a"))
    assert ledger.begin(4) == set()
    assert ids(ledger.unsent(4, acts("a"))) == ["a"]  # the same id planned anew: sent


def test_ledgers_go_once_a_later_batch_commits(tmp_path):
    ledger = SentLedger(tmp_path, Bus())
    for batch in (3, 4, 5):
        ledger.unsent(batch, acts(f"a{batch}"))
    (tmp_path / "4.json").write_text("{}")
    ledger.forget_before(5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["4.json", "5.sent"]
