"""`plan offline`: replace replicas on dead brokers and failed dirs, rack-aware."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

from hypothesis import given, settings

from core.model import ClusterModel
from core.plan.offline import explain, plan_offline
from schemas.plans import ANY_DIR
from tests.unit.plan_snapshots import GIB, broker, clusters, doc, model, partition

SELFHEAL = str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "selfheal")


def six_brokers_three_racks(failed: int | None = None, dead: int | None = None) -> list[dict]:
    """Brokers 0-5 on racks r0,r0,r1,r1,r2,r2, two dirs each; `failed` loses /d1."""
    out = []
    for b in range(6):
        dirs = [
            {
                "path": "/d1",
                "online": b != failed,
                "total_bytes": 100 * GIB,
                "usable_bytes": 50 * GIB,
            },
            {
                "path": "/d2",
                "online": True,
                "total_bytes": 100 * GIB,
                "usable_bytes": (60 + b) * GIB,
            },
        ]
        out.append(broker(b, f"r{b // 2}", dirs, alive=b != dead))
    return out


def test_a_replica_on_a_failed_dir_moves_to_the_rack_the_partition_lacks():
    # t-0 on 0 (r0), 2 (r1), 4 (r2); broker 2's /d1 failed, so r1 is the rack to refill
    # and broker 3 (r1, not in the partition) is the only broker there.
    d = doc(
        six_brokers_three_racks(failed=2),
        [partition("t", 0, [(0, "/d1", GIB), (2, None, 0), (4, "/d1", GIB)], leader=0, isr=[0, 4])],
    )
    plan = plan_offline(model(d))
    assert plan.unrecoverable == ()
    (a,) = plan.reassignment.partitions
    assert a.replicas == (0, 4, 3)
    assert a.log_dirs == (ANY_DIR, ANY_DIR, "/d2")  # /d2 has more free space on broker 3


def test_a_cordoned_dir_gets_no_new_replica_and_a_fully_cordoned_broker_none_at_all():
    # As above, but broker 3's roomier /d2 is cordoned (KIP-1066: Kafka refuses a new
    # replica or a move into it): the replica goes into /d1. With /d1 cordoned too,
    # broker 3 takes nothing (found by the chaos disks scenarios on one loop: a fix named
    # the dir cordoned after the previous fault's heal and never completed).
    brokers = six_brokers_three_racks(failed=2)
    brokers[3]["log_dirs"][1]["cordoned"] = True
    d = doc(brokers, [partition("t", 0, [(0, "/d1", GIB), (2, None, 0), (4, "/d1", GIB)],
                                leader=0, isr=[0, 4])])
    (a,) = plan_offline(model(d)).reassignment.partitions
    assert a.replicas == (0, 4, 3)
    assert a.log_dirs == (ANY_DIR, ANY_DIR, "/d1")
    brokers[3]["log_dirs"][0]["cordoned"] = True
    (a,) = plan_offline(model(doc(brokers, d["partitions"]))).reassignment.partitions
    assert 3 not in a.replicas and len(a.replicas) == 3, a
    assert all(path != ANY_DIR for path in a.log_dirs[2:]), a


def test_the_online_leader_stays_first_and_isr_survivors_come_next():
    d = doc(
        six_brokers_three_racks(dead=0),
        [
            partition(
                "t", 0, [(0, "/d1", GIB), (2, "/d1", GIB), (4, "/d1", GIB)], leader=4, isr=[2, 4]
            )
        ],
    )
    (a,) = plan_offline(model(d)).reassignment.partitions
    assert a.replicas[:2] == (4, 2)
    assert a.replicas[2] == 1  # the other r0 broker: r0 lost its replica
    assert len(a.replicas) == 3


def test_a_dead_brokers_replicas_spread_over_the_brokers_that_can_take_them():
    brokers = [broker(b, f"r{b % 3}", ["/d1", "/d2"], alive=b != 0) for b in range(9)]
    parts = [partition("t", i, [0, 1 + i % 8]) for i in range(32)]
    plan = plan_offline(model(doc(brokers, parts)))
    added = Counter(a.replicas[1] for a in plan.reassignment.partitions)
    assert sum(added.values()) == 32
    # Every partition keeps 2 racks, and the new replicas land evenly on brokers 1-8
    # as far as the rack rule allows (each partition avoids its survivor's rack).
    assert max(added.values()) - min(added.values()) <= 1
    for a in plan.reassignment.partitions:
        assert len({b % 3 for b in a.replicas}) == 2


def test_a_partition_with_no_online_replica_is_left_to_the_operator():
    d = doc(six_brokers_three_racks(dead=1), [partition("t", 0, [1], leader=-1, isr=[])])
    plan = plan_offline(model(d))
    assert plan.reassignment.partitions == ()
    (u,) = plan.unrecoverable
    assert (u.topic, u.partition, u.replicas) == ("t", 0, (1,))
    assert "no online replica" in u.reason


def test_rf_that_no_longer_fits_is_left_to_the_operator_not_shrunk():
    brokers = [broker(0, "a"), broker(1, "b"), broker(2, "c", alive=False)]
    plan = plan_offline(model(doc(brokers, [partition("t", 0, [0, 1, 2], isr=[0, 1])])))
    assert plan.reassignment.partitions == ()
    assert "too few alive brokers" in plan.unrecoverable[0].reason


def test_brokers_with_a_failed_dir_are_a_last_resort_with_log_dir_any():
    # Broker 1 has a failed dir; it is the only broker left that can take a replica.
    brokers = [
        broker(0, "a"),
        broker(1, "b", [{"path": "/d1", "online": True}, {"path": "/d2", "online": False}]),
        broker(2, "c", alive=False),
    ]
    plan = plan_offline(model(doc(brokers, [partition("t", 0, [0, 2], isr=[0])])))
    (a,) = plan.reassignment.partitions
    assert a.replicas == (0, 1)
    assert a.log_dirs == (ANY_DIR, ANY_DIR)


def test_nothing_offline_is_an_empty_plan():
    d = doc(six_brokers_three_racks(), [partition("t", 0, [(0, "/d1", GIB), (2, "/d1", GIB)])])
    plan = plan_offline(model(d))
    assert plan.to_json() == {"version": 1, "partitions": [], "unrecoverable": []}


@settings(max_examples=120, deadline=None)
@given(document=clusters())
def test_every_offline_partition_is_repaired_safely_or_reported(document):
    m = model(document)
    plan = plan_offline(m)
    index = m.partition_index()
    planned = {(a.topic, a.partition): a for a in plan.reassignment.partitions}
    reported = {(u.topic, u.partition) for u in plan.unrecoverable}
    offline = {
        (m.partitions[i].topic, m.partitions[i].partition)
        for i in m.partitions_with_offline_replicas
    }
    assert set(planned) | reported == offline
    assert not set(planned) & reported
    hosts = {b for b in m.alive if m.can_host(b)}
    for key, a in planned.items():
        p = m.partitions[index[key]]
        kept = [r.broker for r in p.replicas if not m.is_offline(r)]
        new = [b for b in a.replicas if b not in kept]
        # RF preserved, distinct brokers, survivors stay put with "any".
        assert len(a.replicas) == len(p.replicas) == len(set(a.replicas))
        assert set(kept) <= set(a.replicas)
        assert all(d == ANY_DIR for b, d in zip(a.replicas, a.log_dirs, strict=True) if b in kept)
        # New replicas: alive brokers outside the partition, on an online dir (or "any"
        # on a broker that has a failed dir).
        for b, d in zip(a.replicas, a.log_dirs, strict=True):
            if b in kept:
                continue
            assert b in hosts
            assert b not in {r.broker for r in p.replicas}
            if d == ANY_DIR:
                assert b in m.brokers_with_offline_dir
            else:
                assert m.dirs[b][d].online
        # The preferred leader can lead now.
        assert a.replicas[0] in kept
        if p.leader in kept:
            assert a.replicas[0] == p.leader
        # As many racks as the survivors and the candidates allow.
        kept_racks = {m.rack_of[b] for b in kept} - {None}
        free_racks = (
            {m.rack_of[b] for b in hosts - {r.broker for r in p.replicas}} - {None} - kept_racks
        )
        racks = {m.rack_of[b] for b in a.replicas} - {None}
        assert len(racks) == len(kept_racks) + min(len(new), len(free_racks))


@settings(max_examples=60, deadline=None)
@given(document=clusters(p_dead=0.3))
def test_explain_summarises_any_plan(document):
    m = model(document)
    text = explain(m, plan_offline(m))
    assert "partitions repaired" in text


def test_cli_prints_kafka_reassignment_json_with_unrecoverable(tmp_path):
    d = doc(
        six_brokers_three_racks(failed=2, dead=5),
        [
            partition(
                "t", 0, [(0, "/d1", GIB), (2, None, 0), (4, "/d1", GIB)], leader=0, isr=[0, 4]
            ),
            partition("t", 1, [(5, "/d1", GIB)], leader=-1, isr=[]),
        ],
    )
    path = tmp_path / "s.json"
    path.write_text(json.dumps(d))
    done = subprocess.run(
        [SELFHEAL, "plan", "offline", "--snapshot", str(path), "--explain",
         "--throttle", str(10 << 20)],
        check=False, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["version"] == 1
    assert out["partitions"] == [
        {"topic": "t", "partition": 0, "replicas": [0, 4, 3], "log_dirs": ["any", "any", "/d2"]}
    ]
    assert [(u["topic"], u["partition"]) for u in out["unrecoverable"]] == [("t", 1)]
    assert "1 partitions repaired, 1 left to the operator" in done.stderr
    assert "t-0: replace 2:? with 3:/d2 (r1)" in done.stderr
    assert "recovery: about 2 min at 10 MiB/s; broker 3 copies the most (1.0 GiB, 1 replica)" \
        in done.stderr


def test_model_offline_detection_matches_the_issue_rule():
    d = doc(
        six_brokers_three_racks(failed=2, dead=5),
        [partition("t", 0, [(2, None, 0), (2 - 1, None, 0), (5, "/d2", 0), (3, "/d1", 0)])],
    )
    m: ClusterModel = model(d)
    assert [m.is_offline(r) for r in m.partitions[0].replicas] == [True, False, True, False]


def test_a_partition_left_to_the_operator_books_no_load():
    # t-0 (RF 4) needs two new replicas and only broker 4 is free: not planned. t-1 then
    # needs one; broker 4 must still look empty, so it wins over broker 1.
    brokers = [broker(0, "a"), broker(1, "b"), broker(2, "c", alive=False)]
    brokers += [broker(3, "d", alive=False), broker(4, "e")]
    parts = [partition("t", 0, [0, 1, 2, 3], isr=[0, 1]), partition("t", 1, [0, 2], isr=[0])]
    plan = plan_offline(model(doc(brokers, parts)))
    assert [(u.topic, u.partition) for u in plan.unrecoverable] == [("t", 0)]
    assert [a.replicas for a in plan.reassignment.partitions] == [(0, 4)]


def test_a_partition_whose_only_in_sync_copy_is_offline_is_left_to_the_operator():
    # t-0's in-sync copy was on broker 2's failed /d1; broker 0 is behind (out of the ISR)
    # and no leader can be elected: a new replica would have nothing to copy from.
    # t-1 has lost its leader too, but broker 4 is in sync and will be elected: repaired.
    d = doc(
        six_brokers_three_racks(failed=2),
        [partition("t", 0, [(0, "/d1", GIB), (2, None, 0)], leader=-1, isr=[2]),
         partition("t", 1, [(2, None, 0), (4, "/d1", GIB)], leader=-1, isr=[2, 4])],
    )
    plan = plan_offline(model(d))
    (u,) = plan.unrecoverable
    assert (u.topic, u.partition, u.replicas) == ("t", 0, (0, 2))
    assert "every in-sync replica is offline" in u.reason
    assert "unclean leader election" in u.reason
    (a,) = plan.reassignment.partitions
    assert (a.partition, a.replicas[0]) == (1, 4)
