"""The driver's kept snapshots (streams/keeper.py): read ahead off the batch's path, used
from memory, read in place when they were not kept."""

from __future__ import annotations

import threading

import msgspec

from streams import keeper as kept
from streams.detect_types import SnapshotRef
from streams.keeper import SnapshotKeeper


def ref(offset: int) -> SnapshotRef:
    return SnapshotRef("selfheal.cluster-snapshots", 0, offset, 1000 + offset)


class Reads:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[int, str]] = []
        self.fail = fail
        self.thread: str | None = None

    def __call__(self, at: SnapshotRef, cluster_id: str) -> bytes:
        self.calls.append((at.offset, cluster_id))
        self.thread = threading.current_thread().name
        if self.fail:
            raise LookupError("gone from the bus")
        return msgspec.json.encode({"offset": at.offset, "cluster": cluster_id})


def test_a_kept_snapshot_is_read_ahead_on_its_own_thread_and_used_from_memory():
    here, ahead = Reads(), Reads()
    keeper = SnapshotKeeper(here, ahead, decoder=msgspec.json.decode)
    keeper.keep(ref(5), "c1")
    assert keeper.get(ref(5), "c1") == {"offset": 5, "cluster": "c1"}
    assert keeper.get(ref(5), "c1") == {"offset": 5, "cluster": "c1"}
    keeper.close()
    assert here.calls == [] and ahead.calls == [(5, "c1")]
    assert ahead.thread is not None and ahead.thread.startswith("selfheal-snapshot-keeper")


def test_an_older_snapshot_does_not_displace_a_newer_one_and_each_cluster_has_its_own():
    here, ahead = Reads(), Reads()
    keeper = SnapshotKeeper(here, ahead, decoder=msgspec.json.decode)
    keeper.keep(ref(9), "c1")
    keeper.get(ref(9), "c1")
    keeper.keep(ref(3), "c1")
    keeper.keep(ref(3), "c2")
    keeper.get(ref(3), "c2")
    keeper.close()
    assert ahead.calls == [(9, "c1"), (3, "c2")]


def test_a_failed_read_ahead_is_read_again_where_it_is_needed():
    here = Reads()
    keeper = SnapshotKeeper(here, Reads(fail=True), decoder=msgspec.json.decode)
    keeper.keep(ref(5), "c1")
    assert keeper.get(ref(5), "c1")["offset"] == 5
    keeper.close()
    assert here.calls == [(5, "c1")]


def test_a_snapshot_never_kept_is_read_in_place():
    here = Reads()
    keeper = SnapshotKeeper(here, decoder=msgspec.json.decode)
    keeper.keep(ref(5), "c1")  # no reader of its own: nothing read ahead
    assert keeper.get(ref(7), "c1")["offset"] == 7 and here.calls == [(7, "c1")]


def test_only_the_most_recently_used_clusters_are_kept():
    here, ahead = Reads(), Reads()
    keeper = SnapshotKeeper(here, ahead, most=2, decoder=msgspec.json.decode)
    for n, cluster in enumerate(("c1", "c2", "c3")):
        keeper.keep(ref(n), cluster)
        keeper.get(ref(n), cluster)
    keeper.get(ref(0), "c1")  # let go for c3: read in place
    keeper.get(ref(2), "c3")  # still kept
    keeper.close()
    assert here.calls == [(0, "c1")] and len(ahead.calls) == 3


def test_the_job_keeps_a_snapshot_as_the_planners_read_it():
    from schemas.snapshot_columns import PartitionColumns
    from schemas.snapshot_types import Snapshot
    from tests.unit.plan_snapshots import broker, doc, partition

    raw = msgspec.json.encode(doc([broker(0), broker(1)], [partition("t", 0, [0, 1])]))
    keeper = SnapshotKeeper(lambda at, cluster_id: raw)  # the job's decoder, by default
    snapshot = keeper.get(ref(1), "c1")
    again = kept.decode(raw)
    assert isinstance(snapshot, Snapshot) and snapshot.brokers == again.brokers
    assert tuple(snapshot.partitions) == tuple(again.partitions)
    assert isinstance(snapshot.partitions, PartitionColumns | tuple)


def test_a_snapshot_the_batch_had_is_decoded_from_its_value_not_read_again():
    here, ahead = Reads(), Reads()
    keeper = SnapshotKeeper(here, ahead, decoder=msgspec.json.decode)
    keeper.keep(ref(5), "c1", msgspec.json.encode({"offset": 5, "from": "the batch"}))
    assert keeper.get(ref(5), "c1") == {"offset": 5, "from": "the batch"}
    keeper.close()
    assert here.calls == ahead.calls == []
