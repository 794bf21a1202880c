"""Which dirs the job cordons and which of its cordons it lifts (core/plan/cordon.py), and
the disk planner's respect for a cordoned dir."""

from __future__ import annotations

from core.plan.cordon import CORDON_METADATA_LEVEL, plan_cordons
from core.plan.disks import plan_disks
from tests.unit.plan_snapshots import GIB, broker, doc, model, partition


def dir_(path: str, cordoned: bool = False, online: bool = True) -> dict:
    d = {"path": path, "online": online, "total_bytes": 100 * GIB if online else None}
    if cordoned:
        d["cordoned"] = True
    return d


def cluster(d1_gib: int, d2_gib: int, d1_cordoned: bool = False,
            d2_cordoned: bool = False, d2_online: bool = True) -> dict:
    """Broker 1 with /d1 holding d1_gib and /d2 holding d2_gib (one partition each)."""
    parts = [partition("t", 0, [(1, "/d1", d1_gib * GIB)])]
    if d2_online:
        parts.append(partition("t", 1, [(1, "/d2", d2_gib * GIB)]))
    return doc([broker(1, "r1", [dir_("/d1", d1_cordoned),
                                 dir_("/d2", d2_cordoned, online=d2_online)])], parts)


def keys(found) -> list[tuple[int, str]]:
    return [(c.broker, c.path) for c in found]


def test_a_dir_past_the_skew_limit_is_cordoned_and_an_even_one_is_not() -> None:
    plan = plan_cordons(model(cluster(30, 10)), 1.10)
    assert keys(plan.cordon) == [(1, "/d1")]
    assert "1.50x" in plan.cordon[0].reason and plan.uncordon == ()
    assert plan_cordons(model(cluster(10, 10)), 1.10).cordon == ()


def test_a_dir_that_failed_and_came_back_is_cordoned_though_it_is_even() -> None:
    plan = plan_cordons(model(cluster(10, 10)), 1.10, returned=[(1, "/d2")])
    assert keys(plan.cordon) == [(1, "/d2")]
    assert "back online" in plan.cordon[0].reason


def test_a_dir_already_cordoned_is_not_cordoned_again() -> None:
    assert plan_cordons(model(cluster(30, 10, d1_cordoned=True)), 1.10).cordon == ()


def test_our_cordon_is_lifted_when_the_dir_is_even_again_and_not_before() -> None:
    even = model(cluster(10, 10, d1_cordoned=True))
    assert keys(plan_cordons(even, 1.10, ours=[(1, "/d1")]).uncordon) == [(1, "/d1")]
    still_full = model(cluster(30, 10, d1_cordoned=True))
    assert plan_cordons(still_full, 1.10, ours=[(1, "/d1")]).uncordon == ()


def test_a_returned_dir_keeps_our_cordon_while_it_is_still_held_as_returned() -> None:
    even = model(cluster(10, 10, d2_cordoned=True))
    assert plan_cordons(even, 1.10, ours=[(1, "/d2")], returned=[(1, "/d2")]).uncordon == ()


def test_an_operators_cordon_is_never_lifted() -> None:
    even = model(cluster(10, 10, d1_cordoned=True))
    assert plan_cordons(even, 1.10, ours=[]).uncordon == ()


def test_the_last_open_dir_of_a_broker_is_never_cordoned() -> None:
    # /d2 is the operator's; cordoning the full /d1 would leave broker 1 no dir at all
    plan = plan_cordons(model(cluster(30, 10, d2_cordoned=True)), 1.10)
    assert plan.cordon == ()
    # /d2 failed: /d1 is the only online dir, returned or not
    alone = model(cluster(10, 0, d2_online=False))
    assert plan_cordons(alone, 1.10, returned=[(1, "/d1")]).cordon == ()


def test_nothing_is_proposed_below_metadata_version_4_3_and_one_line_says_why() -> None:
    full = model(cluster(30, 10))
    old = plan_cordons(full, 1.10, metadata_level=CORDON_METADATA_LEVEL - 1)
    assert old.cordon == () and old.unsupported is not None
    assert "4.3-IV0" in old.unsupported and "\n" not in old.unsupported
    zk = plan_cordons(full, 1.10, metadata_level=None)
    assert zk.cordon == () and "ZooKeeper" in (zk.unsupported or "")


def test_the_disk_planner_never_moves_a_replica_into_a_cordoned_dir() -> None:
    three = doc([broker(1, "r1", [dir_("/d1"), dir_("/d2", cordoned=True), dir_("/d3")])],
                [partition("t", i, [(1, "/d1", 5 * GIB)]) for i in range(4)])
    moves = plan_disks(model(three), 1.10).moves
    assert moves and {m.target for m in moves} == {"/d3"}
    # without the cordon the emptiest dir, /d2, takes the first move
    three["brokers"][0]["log_dirs"][1].pop("cordoned")
    assert "/d2" in {m.target for m in plan_disks(model(three), 1.10).moves}


def test_of_two_dirs_the_returned_one_is_cordoned_not_its_full_sibling() -> None:
    # /d2 came back empty, so /d1 reads past the skew limit; only one of the broker's
    # two dirs may be cordoned, and it is the one back from its failure, whatever the
    # paths' order.
    for returned, full in (("/d2", (30, 0)), ("/d1", (0, 30))):
        plan = plan_cordons(model(cluster(*full)), 1.10, returned=[(1, returned)])
        assert keys(plan.cordon) == [(1, returned)], (returned, plan)
        assert "back online" in plan.cordon[0].reason
