"""The plan drawn on the approval page, in a real browser (Debian's Chromium): a fix for a
failed dir shows replica placement by broker and rack before and after, a disk move shows
each dir's usage before and after. Plans come from the real planners; screenshots are
saved (SELFHEAL_SCREENSHOT_DIR, default /tmp/selfheal-screenshots) for a person to look at.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.plan.disks import plan_disks
from core.plan.offline import plan_offline
from remediation.service import pages
from remediation.service.plan_picture import GREEN, RED
from schemas.actions import build_action
from schemas.records import Trigger
from tests.unit.plan_snapshots import GIB, broker, doc, model, partition

pytestmark = pytest.mark.e2e

SCREENSHOT_DIR = Path(os.environ.get("SELFHEAL_SCREENSHOT_DIR", "/tmp/selfheal-screenshots"))
NOW = "2026-11-22T03:00:00.000Z"


def shoot(browser, html: str, name: str):
    page = browser.new_page(viewport={"width": 1000, "height": 800})
    page.set_content(html)
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT_DIR / name), full_page=True)
    return page


def render(action, the_model) -> str:
    live = pages.LiveView(pages.current_replicas(the_model), the_model)
    return pages.render_approval(action, form_action="/approve", csrf_token="c",
                                 link_token="t", current=live)


def test_a_fix_shows_replica_placement_by_broker_and_rack_before_and_after(browser) -> None:
    racks = {0: "r1", 1: "r1", 2: "r2", 3: "r2", 4: "r3", 5: "r3"}
    brokers = [broker(b, racks[b], dirs=[{"path": "/d1", "online": b != 2, "total_bytes":
                                           100 * GIB},
                                          {"path": "/d2", "online": True,
                                           "total_bytes": 100 * GIB}]) for b in racks]
    parts = [partition("orders", i, [(2, "/d1", GIB), ((i % 2) * 4, "/d2", GIB),
                                     (1 + 2 * (i % 2), "/d2", GIB)]) for i in range(6)]
    parts += [partition("audit", i, [(i + 3, "/d2", GIB), (2, "/d1", GIB)]) for i in range(3)]
    the_model = model(doc(brokers, parts))
    plan = plan_offline(the_model)
    action = build_action("c1", "fix_offline_replicas", plan, reason="log dir /d1 on broker 2 "
                           "is offline", trigger=Trigger("logdir_event", 2, "/d1"),
                           event_time=NOW, created_at=NOW, bytes_moved=9 * GIB)
    page = shoot(browser, render(action, the_model), "approval-fix-placement.png")
    try:
        svg = page.locator("svg.plan")
        assert svg.count() == 1
        # every partition lost its replica on broker 2: one red dot each before, and one
        # new (green) replica each after, none of them on broker 2
        assert svg.locator(f'circle.replica[fill="{RED}"]').count() == 9
        assert svg.locator(f'circle.replica[fill="{GREEN}"]').count() == 9
        titles = svg.locator(f'circle.replica[fill="{GREEN}"]').evaluate_all(
            "dots => dots.map(d => d.textContent)")
        assert len(titles) == 9 and all("new replica" in t for t in titles)
        assert not [t for t in titles if "on broker 2:" in t]
        text = " ".join(svg.locator("text").all_text_contents())
        assert all(r in text.split() for r in ("r1", "r2", "r3"))  # rack headers
        assert "Before" in text and "After" in text
        box = svg.bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 200  # drawn
        # Each new copy goes to a rack the partition's surviving replicas are not on.
        for target in action.targets():
            kept = {racks[b] for b in target.replicas[:-1]}
            assert racks[target.replicas[-1]] not in kept, target
    finally:
        page.close()


def test_a_disk_move_shows_usage_per_dir_before_and_after(browser) -> None:
    brokers = [broker(1, "r1", dirs=[{"path": "/data/a", "online": True,
                                      "total_bytes": 100 * GIB, "usable_bytes": 10 * GIB},
                                     {"path": "/data/b", "online": True,
                                      "total_bytes": 100 * GIB, "usable_bytes": 70 * GIB}]),
               broker(2, "r2", dirs=["/data/a"])]
    parts = [partition("logs", i, [(1, "/data/a", 10 * GIB), (2, "/data/a", 10 * GIB)])
             for i in range(8)]
    parts.append(partition("logs", 8, [(1, "/data/b", 10 * GIB), (2, "/data/a", 10 * GIB)]))
    the_model = model(doc(brokers, parts))
    plan = plan_disks(the_model)
    assert plan.moves
    moved = sum(m.size_bytes for m in plan.moves)
    action = build_action("c1", "move_replica_dirs", plan, reason="broker 1 is skewed",
                          trigger=Trigger("metric", 1, "/data/a"), event_time=NOW,
                          created_at=NOW, bytes_moved=moved)
    page = shoot(browser, render(action, the_model), "approval-disk-usage.png")
    try:
        svg = page.locator("svg.plan")
        text = " ".join(svg.locator("text").all_text_contents())
        assert "/data/a" in text and "/data/b" in text
        # 90 GiB used on /data/a before (100 - 10 free), 30 GiB on /data/b
        assert "before 90.0%" in text and "before 30.0%" in text
        after_a = 90 - moved / GIB
        after_b = 30 + moved / GIB
        assert f"after {after_a:.1f}%" in text and f"after {after_b:.1f}%" in text
        assert abs(after_a - after_b) < 90 - 30  # the move evens the disks out
    finally:
        page.close()
