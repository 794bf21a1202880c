"""The plan drawn for the approval page: server-rendered SVG, no JavaScript.

- Reassignments (a fix, a leader plan): replica placement of the plan's partitions by
  broker, brokers grouped by rack, before and after side by side. Before, a replica on a
  failed dir or a dead broker is red; after, a new replica is green; the preferred
  leader (first in the list) has a dark ring. Under each side, replicas of these
  partitions per broker.
- Disk moves: per log dir of each broker the plan touches, usage before and after
  (from the dir's size and free space as DescribeLogDirs reports them, and the moved
  replicas' sizes).

Everything here comes from the action record and the executor's latest read of the
cluster; a standby, which has no read, draws only what the record says. Topic names and
dirs are outside input and are escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import TYPE_CHECKING

from core.plan.formats import human_bytes
from schemas.records import Action

if TYPE_CHECKING:
    from core.model import ClusterModel

MAX_ROWS = 24  # partitions drawn; the list under the picture has them all
ROW = 22
CELL = 30
LABEL = 150
HEAD = 58
GREY, RED, GREEN, BLUE, INK = "#9aa5b1", "#d64545", "#2f9e44", "#3b6fd4", "#1f2933"

Replicas = Mapping[tuple[str, int], Sequence[int]]


def plan_svg(action: Action, current: Replicas | None, model: ClusterModel | None) -> str:
    """The picture of `action`'s plan, or "" when there is nothing to draw."""
    if action.type == "move_replica_dirs":
        return dir_bars(action, model)
    if action.type in ("fix_offline_replicas", "rebalance_leaders"):
        return placement(action, current, model)
    return ""


# --- replica placement ------------------------------------------------------------------

def placement(action: Action, current: Replicas | None, model: ClusterModel | None) -> str:
    targets = action.targets()[:MAX_ROWS]
    if not targets:
        return ""
    before: dict[tuple[str, int], tuple[int, ...]] = {}
    offline: set[tuple[str, int, int]] = set()
    if model is not None:
        for p in model.partitions:
            before[(p.topic, p.partition)] = tuple(r.broker for r in p.replicas)
            offline.update((p.topic, p.partition, r.broker) for r in p.replicas
                           if model.is_offline(r))
    elif current is not None:
        before = {k: tuple(v) for k, v in current.items()}
    racks = dict(model.rack_of) if model is not None else {}
    brokers = set(racks) | {b for t in targets for b in t.replicas} | {
        b for t in targets for b in before.get((t.topic, t.partition), ())}
    order = sorted(brokers, key=lambda b: (racks.get(b) or "~", b))
    dead = set() if model is None else {b for b in brokers if b not in model.alive}
    cell = max(CELL, min(60, 330 // max(1, len(order))))  # few brokers: wider columns
    width_side = len(order) * cell
    width = max(LABEL + 2 * width_side + 40, 640)  # the legend needs 640
    height = HEAD + len(targets) * ROW + 2 * ROW + 30
    out = [_open(width, height, f"Replica placement of {len(action.targets())} partitions "
                 "by broker and rack, before and after")]
    sides = (("Before", 0), ("After", 1))
    for title, i in sides:
        x0 = LABEL + i * (width_side + 40)
        out.append(_text(x0 + width_side / 2, 14, title, weight="bold", anchor="middle"))
        out += _broker_header(order, racks, dead, x0, cell)
    counts: list[dict[int, int]] = [dict.fromkeys(order, 0), dict.fromkeys(order, 0)]
    for row, t in enumerate(targets):
        y = HEAD + row * ROW
        key = (t.topic, t.partition)
        out.append(_text(LABEL - 8, y + 15, _fit(f"{t.topic}-{t.partition}", 21),
                         anchor="end", size=11, mono=True))
        was = before.get(key)
        for side, replicas in ((0, was), (1, tuple(t.replicas))):
            x0 = LABEL + side * (width_side + 40)
            if row % 2 == 0:
                out.append(f'<rect x="{x0}" y="{y + 2}" width="{width_side}" height="{ROW - 2}"'
                           ' fill="#f4f6f8"/>')
            if replicas is None:
                out.append(_text(x0 + width_side / 2, y + 15, "not in the latest read",
                                 anchor="middle", size=10, fill=GREY))
                continue
            for b in replicas:
                counts[side][b] = counts[side].get(b, 0) + 1
                cx = x0 + order.index(b) * cell + cell / 2
                if side == 0:
                    color = RED if (t.topic, t.partition, b) in offline else GREY
                else:
                    color = BLUE if was is not None and b in was else GREEN
                ring = f' stroke="{INK}" stroke-width="2.5"' if b == replicas[0] else ""
                out.append(f'<circle class="replica" cx="{cx}" cy="{y + 11}" r="7" '
                           f'fill="{color}"{ring}>'
                           f"<title>{escape(_what(t.topic, t.partition, b, side, color))}"
                           "</title></circle>")
    y = HEAD + len(targets) * ROW + 16
    out.append(_text(LABEL - 8, y, "replicas here", anchor="end", size=11))
    for side in (0, 1):
        x0 = LABEL + side * (width_side + 40)
        for b in order:
            out.append(_text(x0 + order.index(b) * cell + cell / 2, y, str(counts[side][b]),
                             anchor="middle", size=11))
    out.append(_legend(12, height - 8))
    if len(action.targets()) > MAX_ROWS:
        out.append(_text(width - 8, height - 8, f"first {MAX_ROWS} of "
                         f"{len(action.targets())} partitions", anchor="end", size=10))
    out.append("</svg>")
    return "".join(out)


def _broker_header(order: list[int], racks: Mapping[int, str | None], dead: set[int],
                   x0: float, cell: float) -> list[str]:
    out = []
    start = 0
    for i, b in enumerate(order + [-1]):
        rack = racks.get(b) if b != -1 else object()
        if i > 0 and (b == -1 or rack != racks.get(order[i - 1])):
            name = racks.get(order[i - 1]) or "no rack"
            x = x0 + start * cell
            w = (i - start) * cell
            out.append(f'<rect x="{x + 1}" y="22" width="{w - 2}" height="14" rx="3" '
                       'fill="#e4e7eb"/>')
            out.append(_text(x + w / 2, 33, _fit(name, max(1, int(w // 6.5))),
                             anchor="middle", size=10))
            start = i
    for i, b in enumerate(order):
        label = f"b{b}" + (" ✕" if b in dead else "")
        out.append(_text(x0 + i * cell + cell / 2, 50, label, anchor="middle", size=11,
                         fill=RED if b in dead else INK))
    return out


def _what(topic: str, partition: int, broker: int, side: int, color: str) -> str:
    state = {RED: "offline replica", GREY: "replica", GREEN: "new replica",
             BLUE: "replica kept"}[color]
    return f"{topic}-{partition} on broker {broker}: {state}" + (" (before)" if side == 0
                                                                   else " (after)")


def _legend(x: float, y: float) -> str:
    items = ((GREY, "replica before"), (RED, "offline (failed dir or broker)"),
             (BLUE, "kept"), (GREEN, "new copy"))
    out = []
    for color, text in items:
        out.append(f'<circle cx="{x + 6}" cy="{y - 4}" r="5" fill="{color}"/>')
        out.append(_text(x + 15, y, text, size=10))
        x += 24 + len(text) * 5.6
    out.append(f'<circle cx="{x + 6}" cy="{y - 4}" r="5" fill="white" stroke="{INK}" '
               'stroke-width="2"/>')
    out.append(_text(x + 15, y, "preferred leader", size=10))
    return "".join(out)


# --- disk usage ---------------------------------------------------------------------------

def dir_bars(action: Action, model: ClusterModel | None) -> str:
    """Usage per dir before and after the moves, for every broker the plan moves on."""
    if model is None:
        return ""
    moved: dict[tuple[int, str], int] = {}
    for t in action.targets():
        part = next((p for p in model.partitions
                     if (p.topic, p.partition) == (t.topic, t.partition)), None)
        if part is None:
            continue
        for b, dest in zip(t.replicas, t.log_dirs or (), strict=False):
            if dest == "any":
                continue
            replica = next((r for r in part.replicas if r.broker == b), None)
            if replica is None or replica.log_dir in (None, dest):
                continue
            moved[(b, replica.log_dir)] = moved.get((b, replica.log_dir), 0) - replica.size_bytes
            moved[(b, dest)] = moved.get((b, dest), 0) + replica.size_bytes
    brokers = sorted({b for b, _ in moved})
    rows = [(b, d) for b in brokers for d in sorted(model.dirs.get(b, {}))]
    if not rows:
        return ""
    bar = 420
    width = LABEL + 140 + bar + 150
    height = 40 + len(rows) * 44 + 20
    out = [_open(width, height, "Log dir usage before and after the moves")]
    out.append(_text(LABEL + 140, 16, "usage of the disk (grey: before, blue: after)",
                     size=11))
    y = 34
    for b, path in rows:
        d = model.dirs[b][path]
        used = _used(model, b, path)
        after = used + moved.get((b, path), 0)
        out.append(_text(12, y + 14, f"broker {b}", size=11, weight="bold"))
        out.append(_text(LABEL + 130, y + 14, _fit(path, 24), anchor="end", size=11,
                         mono=True))
        total = d.total_bytes if d.total_bytes and d.total_bytes > 0 else None
        for i, (value, color) in enumerate(((used, GREY), (after, BLUE))):
            frac = (value / total) if total else 0.0
            yy = y + i * 16
            x = LABEL + 140
            out.append(f'<rect x="{x}" y="{yy + 2}" width="{bar}" height="12" rx="2" '
                       'fill="#eef0f2"/>')
            out.append(f'<rect x="{x}" y="{yy + 2}" width="{bar * min(frac, 1.0):.1f}" '
                       f'height="12" rx="2" fill="{color}"/>')
            pct = f"{frac * 100:.1f}%" if total else "size unknown"
            label = ("before " if i == 0 else "after ") + f"{pct}, {human_bytes(max(value, 0))}"
            out.append(_text(x + bar + 8, yy + 12, label, size=10))
        y += 44
    out.append("</svg>")
    return "".join(out)


def _used(model: ClusterModel, broker: int, path: str) -> int:
    d = model.dirs[broker][path]
    if d.total_bytes is not None and d.usable_bytes is not None and d.total_bytes > 0:
        return d.total_bytes - d.usable_bytes
    return model.dir_bytes.get((broker, path), 0)


# --- SVG bits ----------------------------------------------------------------------------

def _fit(text: str, chars: int) -> str:
    """`text` in at most `chars` characters, keeping its end (where names differ)."""
    return text if len(text) <= chars else "…" + text[-(chars - 1):]


def _open(width: float, height: float, title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" class="plan" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" width="100%" '
            f'style="max-width:{width:.0f}px" font-family="system-ui,sans-serif">'
            f"<title>{escape(title)}</title>")


def _text(x: float, y: float, text: str, *, anchor: str = "start", size: int = 12,
          weight: str = "normal", fill: str = INK, mono: bool = False) -> str:
    family = ' font-family="ui-monospace,monospace"' if mono else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" '
            f'font-weight="{weight}" fill="{fill}"{family}>{escape(text)}</text>')
