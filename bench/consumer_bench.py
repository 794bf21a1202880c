"""The consumer planners next to Kafka's own assignors (kafka-clients from jvm/lib/broker).

1. Rack-aware range at 1,000 members x 10,000 partitions: `plan_consumers(model, g,
   "range")` in-process (per-partition racks from the model, the assignment, the
   cross-rack count) next to Java's `RangeAssignor.assign(cluster, group)` (racks from
   the cluster metadata, the assignment), best and median of several runs after a
   warm-up; the target is Python within 2x of Java. Both assignments must be the same.
   `assign_range` alone is timed too, to show what the racks' pass around it costs.
2. Cooperative-sticky on generated groups (equal and mixed subscriptions, members
   without a rack, partitions in one rack): our plan against Java's
   CooperativeStickyAssignor on a fresh group: balance (max - min partitions per
   member, and Java's own score, the sum of pairwise differences), then cross-rack
   partitions. Ours must never be worse: less even, or as even and less local.
3. Cooperative-sticky after a membership change, from a range assignment: the same,
   then partitions moved from their owner, against Java's target once its cooperative
   rounds settle.

The Java side is jvm/bench/ConsumerAssignBench.java, compiled into jvm/build/bench
(gitignored) with the JDK's javac and run with -Xmx1g. Without a JDK or the jars
(`make jars`) only the Python figures are printed.
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any
from unittest.mock import patch

from core.model import ClusterModel
from core.plan.consumers import (
    assign_cooperative_sticky,
    assign_range,
    cross_rack,
    plan_consumers,
)
from core.plan.formats import TopicPartition
from schemas.snapshot import Member, snapshot_from_dict

JVM = Path(__file__).resolve().parents[1] / "jvm"
SOURCE = JVM / "bench" / "ConsumerAssignBench.java"
BUILD = JVM / "build" / "bench"
RACKS = ("r0", "r1", "r2")
Racks = dict[str, dict[int, frozenset[str]]]
Assignment = Mapping[str, tuple[TopicPartition, ...]]


def generate(
    seed: int, members: int, partitions: int, topics: int, *, patterns: int = 0,
    equal_topics: bool = False, no_rack: float = 0.05,
) -> tuple[list[Member], Racks]:  # fmt: skip
    """A group: members round robin over three racks (a share without one, some
    static), `patterns` distinct subscriptions (0: every member on every topic);
    partitions with replicas on two racks (70%), one rack (20%) or all three."""
    rng = random.Random(seed)
    if equal_topics:
        sizes = [partitions // topics] * topics
    else:
        cuts = sorted(rng.sample(range(1, partitions), topics - 1))
        sizes = [b - a for a, b in zip([0, *cuts], [*cuts, partitions], strict=True)]
    racks: Racks = {}
    for k, size in enumerate(sizes):
        racks[f"topic-{k:03d}"] = {
            p: frozenset(rng.sample(RACKS, rng.choices((2, 1, 3), (70, 20, 10))[0]))
            for p in range(size)
        }
    names = list(racks)
    subs = [
        tuple(rng.sample(names, rng.randint(1, len(names)))) for _ in range(min(patterns, members))
    ]
    group = []
    for i in range(members):
        rack = None if rng.random() < no_rack else RACKS[i % len(RACKS)]
        static = f"instance-{i:05d}" if rng.random() < 0.1 else None
        topics_of = subs[i % len(subs)] if subs else tuple(names)
        group.append(
            Member(f"consumer-{rng.getrandbits(32):08x}-{i}", "app", rack, topics_of, static)
        )
    return group, racks


def model_of(members: list[Member], racks: Racks) -> ClusterModel:
    """A snapshot holding the group: broker b on rack b % 3 (broker 6 without a rack)."""
    brokers = [
        {"id": b, "rack": RACKS[b % 3] if b < 6 else None, "alive": True,
         "log_dirs": [{"path": "/d1", "online": True, "total_bytes": 1 << 40}]}
        for b in range(7)
    ]  # fmt: skip
    parts = []
    for t, numbers in racks.items():
        for p, where in numbers.items():
            ids = [RACKS.index(r) + 3 * (p % 2) for r in sorted(where)] or [6]
            reps = [{"broker": b, "log_dir": "/d1", "size_bytes": 1} for b in ids]
            parts.append({"topic": t, "partition": p, "leader": ids[0], "isr": ids,
                          "replicas": reps})  # fmt: skip
    group = {
        "group": "g",
        "members": [
            {"member_id": m.member_id, "client_id": m.client_id, "rack": m.rack,
             "topics": list(m.topics), "group_instance_id": m.group_instance_id}
            for m in members
        ],
    }  # fmt: skip
    doc: dict[str, Any] = {
        "version": 1, "cluster_id": "bench", "taken_at": "2026-11-25T00:00:00Z",
        "brokers": brokers, "partitions": parts, "consumer_groups": [group],
    }  # fmt: skip
    return ClusterModel(snapshot_from_dict(doc))


def write_group(
    path: Path, members: list[Member], racks: Racks, owned: Assignment | None = None
) -> None:
    lines = [
        f"P\t{t}\t{p}\t{','.join(sorted(where)) or '-'}"
        for t, numbers in racks.items()
        for p, where in numbers.items()
    ]
    lines += [
        f"M\t{m.member_id}\t{m.rack or '-'}\t{m.group_instance_id or '-'}\t{','.join(m.topics)}"
        for m in members
    ]
    lines += [
        f"O\t{m}\t{','.join(f'{tp.topic}:{tp.partition}' for tp in tps)}"
        for m, tps in (owned or {}).items()
        if tps
    ]
    path.write_text("\n".join(lines) + "\n")


def read_assignment(path: Path) -> dict[str, tuple[TopicPartition, ...]]:
    out: dict[str, tuple[TopicPartition, ...]] = {}
    for line in path.read_text().splitlines():
        member, _, tps = line.partition("\t")
        parts = [tp.rsplit(":", 1) for tp in tps.split(",") if tp]
        out[member] = tuple(sorted(TopicPartition(t, int(p)) for t, p in parts))
    return out


def java_ready() -> list[str] | None:
    """The java command line with the harness on its classpath, compiled if stale;
    None (and why) when there is no JDK or no kafka-clients jar."""
    jars = sorted((JVM / "lib" / "broker").glob("kafka-clients-*.jar"))
    slf4j = sorted((JVM / "lib" / "broker").glob("slf4j-api-*.jar"))
    javac, java = shutil.which("javac"), shutil.which("java")
    if not jars or not javac or not java:
        print("no javac/java or no kafka-clients jar (make jars): Java figures skipped")
        return None
    classpath = ":".join(str(p) for p in [jars[-1], *slf4j[-1:], BUILD])
    compiled = BUILD / "ConsumerAssignBench.class"
    if not compiled.exists() or compiled.stat().st_mtime < SOURCE.stat().st_mtime:
        BUILD.mkdir(parents=True, exist_ok=True)
        subprocess.run([javac, "-d", str(BUILD), "-cp", str(jars[-1]), str(SOURCE)], check=True)
    return [java, "-Xmx1g", "-XX:+UseSerialGC", "-cp", classpath, "ConsumerAssignBench"]


class Timing:
    """Best and median of several runs, wall and CPU (the calling thread's) in ms."""

    def __init__(self, wall: list[float], cpu: list[float]) -> None:
        self.best, self.median = min(wall), statistics.median(wall)
        self.cpu_best, self.cpu_median = min(cpu), statistics.median(cpu)

    def __str__(self) -> str:
        return f"{self.best:.0f}/{self.median:.0f} ({self.cpu_best:.0f}/{self.cpu_median:.0f})"


def run_java(
    command: list[str], assignor: str, warmup: int, runs: int, groups: list[Path]
) -> list[tuple[Timing, dict[str, tuple[TopicPartition, ...]]]]:
    """Timing and assignment of Java's assignor on each group file."""
    args = [a for g in groups for a in (str(g), str(g.with_suffix(".out")))]
    done = subprocess.run(
        [*command, assignor, str(warmup), str(runs), *args],
        capture_output=True, text=True, check=False, timeout=1800,
    )  # fmt: skip
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise RuntimeError(f"the Java harness failed (exit {done.returncode})")
    out = []
    for line, g in zip(done.stdout.splitlines(), groups, strict=True):
        f = {k: float(v) for k, v in (x.split("=") for x in line.split()[2:])}
        timing = Timing([f["min_ms"], f["median_ms"]], [f["cpu_min_ms"], f["cpu_median_ms"]])
        out.append((timing, read_assignment(g.with_suffix(".out"))))
    return out


def timed(call: Callable[[], Any], warmup: int, runs: int) -> tuple[Timing, Any]:
    for _ in range(warmup):
        call()
    wall, cpu, result = [], [], None
    for _ in range(runs):
        start, cpu_start = time.perf_counter(), time.thread_time()
        result = call()
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.thread_time() - cpu_start) * 1000)
    return Timing(wall, cpu), result


def balance(members: list[Member], assignment: Assignment) -> tuple[int, int]:
    """(max - min partitions per member, sum of pairwise differences: Java's score)."""
    counts = sorted(len(assignment.get(m.member_id, ())) for m in members)
    n = len(counts)
    return counts[-1] - counts[0], sum(c * (2 * i - n + 1) for i, c in enumerate(counts))


RANGE_SHAPES = (
    ("10 topics x 1,000 (co-partitioned)", {"topics": 10, "equal_topics": True}),
    ("25 topics, uneven sizes", {"topics": 25}),
    ("1 topic x 10,000", {"topics": 1}),
)
STICKY_SHAPES = (
    ("equal subs", {"patterns": 0}),
    ("3 patterns", {"patterns": 3}),
    ("each its own", {"patterns": 10_000}),
)


def range_figures(java: list[str] | None, work: Path) -> None:
    print("rack-aware range, 1,000 members x 10,000 partitions; target: python <= 2x java")
    print("python: plan_consumers(model, g, 'range') in-process (the model's racks, the")
    print("  assignment, the cross-rack count); assign_range: the assignment alone (CPU)")
    print("java: RangeAssignor.assign(cluster, group), warmed up by 20 calls first")
    print("ms: median of 15 runs (best); CPU: the calling thread's (Java's plus its GC)")
    print("ratio: python plan_consumers median / java assign median, wall then CPU")
    header = ("python wall", "java wall", "ratio", "python cpu", "java cpu", "ratio")
    print(f"{'shape':<36}" + "".join(f"{h:>12}" for h in header) + "  assign_range  same")
    for n, (label, shape) in enumerate(RANGE_SHAPES):
        members, racks = generate(n, 1000, 10_000, **shape)  # type: ignore[arg-type]
        model = model_of(members, racks)
        ours, plan = timed(partial(plan_consumers, model, "g", "range"), 3, 15)
        alone, _ = timed(partial(assign_range, members, racks), 3, 15)
        cells = [_ms(ours.median, ours.best), "-", "-", _ms(ours.cpu_median, ours.cpu_best)]
        cells += ["-", "-"]
        same = "-"
        if java is not None:
            path = work / f"range-{n}.group"
            write_group(path, members, racks)
            [(theirs, assignment)] = run_java(java, "range", 20, 15, [path])
            cells[1] = _ms(theirs.median, theirs.best)
            cells[2] = f"{ours.median / theirs.median:.1f}x"
            cells[4] = _ms(theirs.cpu_median, theirs.cpu_best)
            cells[5] = f"{ours.cpu_median / theirs.cpu_median:.1f}x"
            same = "yes" if assignment == plan.assignment else "NO"
        row = "".join(f"{c:>12}" for c in cells)
        print(f"{label:<36}{row}{_ms(alone.cpu_median, alone.cpu_best):>14}  {same}", flush=True)


def _ms(median: float, best: float) -> str:
    return f"{median:.0f} ({best:.0f})"


def sticky_figures(java: list[str] | None, work: Path) -> None:
    print()
    print("cooperative-sticky on fresh groups: ours vs Java's (balance, then cross-rack)")
    sizes = ((6, 24), (12, 60), (30, 200), (60, 500))
    cases: list[tuple[str, list[Member], Racks, Path]] = []
    for label, shape in STICKY_SHAPES:
        for seed in range(4):
            for m, p in sizes:
                members, racks = generate(seed, m, p, 4, **shape)  # type: ignore[arg-type]
                path = work / f"sticky-{len(cases)}.group"
                write_group(path, members, racks)
                cases.append((f"{label}, {m} x {p}", members, racks, path))
    results = run_java(java, "cooperative-sticky", 0, 1, [c[3] for c in cases]) if java else []
    tally = {"better": 0, "same": 0, "worse": 0}
    rows: dict[str, list[tuple[int, int, int, int, int, int]]] = {}
    for n, (label, members, racks, _) in enumerate(cases):
        ours = assign_cooperative_sticky(members, racks)
        spread, score = balance(members, ours)
        cross = cross_rack(members, ours, racks)
        jspread = jscore = jcross = -1
        if results:
            theirs = results[n][1]
            jspread, jscore = balance(members, theirs)
            jcross = cross_rack(members, theirs, racks)
            verdict = (score, cross) < (jscore, jcross), (score, cross) == (jscore, jcross)
            tally["better" if verdict[0] else "same" if verdict[1] else "worse"] += 1
        rows.setdefault(label, []).append((spread, score, cross, jspread, jscore, jcross))
    print(f"{'group (4 seeds each)':<30}{'spread ours/java':>18}{'score ours/java':>18}"
          f"{'cross-rack ours/java':>22}")  # fmt: skip
    for label, found in rows.items():
        s = [sum(r[k] for r in found) for k in range(6)]
        print(
            f"{label:<30}{f'{s[0]} / {s[3]}':>18}{f'{s[1]} / {s[4]}':>18}{f'{s[2]} / {s[5]}':>22}"
        )
    if results:
        print(
            f"ours vs Java over {len(cases)} groups: better {tally['better']}, "
            f"same {tally['same']}, worse {tally['worse']} (sums over seeds above)"
        )

    print()
    print("cooperative-sticky timing on fresh groups (ms, best / median; CPU in brackets)")
    print("native: the compiled flow (docs/native.md); reference: SELFHEAL_NATIVE=0, one run")
    # Java's general builder (mixed subscriptions) takes seconds here: one cold run.
    for label, shape, (m, p, topics), (warmup, runs) in (
        ("equal subs", STICKY_SHAPES[0][1], (1000, 10_000, 10), (1, 3)),
        ("3 patterns", STICKY_SHAPES[1][1], (300, 3000, 10), (0, 1)),
        ("each its own", STICKY_SHAPES[2][1], (1000, 10_000, 10), (0, 1)),
        ("each its own", STICKY_SHAPES[2][1], (1000, 10_000, 25), (0, 1)),
    ):
        members, racks = generate(7, m, p, topics, **shape)  # type: ignore[arg-type]
        ours, plan = timed(lambda g=members, r=racks: assign_cooperative_sticky(g, r), 1, 3)
        with patch.dict(os.environ, {"SELFHEAL_NATIVE": "0"}):  # the Python reference
            slow, again = timed(lambda g=members, r=racks: assign_cooperative_sticky(g, r), 0, 1)
        line = f"  {label}, {m} x {p}, {topics} topics: native {ours}, reference {slow}"
        line += f" ({'same' if again == plan else 'DIFFERENT'})"
        if java is not None:
            path = work / f"sticky-big-{m}-{topics}-{label[0]}.group"
            write_group(path, members, racks)
            [(theirs, assignment)] = run_java(java, "cooperative-sticky", warmup, runs, [path])
            line += (
                f", java {theirs}; cross-rack ours {cross_rack(members, plan, racks)} "
                f"java {cross_rack(members, assignment, racks)}, spread ours "
                f"{balance(members, plan)[0]} java {balance(members, assignment)[0]}"
            )
        print(line, flush=True)


def moves(members: list[Member], current: Assignment, assignment: Assignment) -> int:
    """Partitions given to another member than the one that owns them now (and may
    keep them: still in the group, still subscribed)."""
    topics = {m.member_id: set(m.topics) for m in members}
    owner = {
        (tp.topic, tp.partition): m
        for m, tps in current.items()
        if m in topics
        for tp in tps
        if tp.topic in topics[m]
    }
    return sum(
        1
        for m, tps in assignment.items()
        for tp in tps
        if owner.get((tp.topic, tp.partition), m) != m
    )


def sticky_move_figures(java: list[str] | None, work: Path) -> None:
    """A group on rack-aware range loses every fifth member and gains two: our plan
    from that assignment vs Java's cooperative-sticky once its rounds settle."""
    print()
    print("cooperative-sticky after a membership change (from a range assignment):")
    print("ours vs Java's target (score = sum of pairwise count differences)")
    cases = []
    for label, shape in STICKY_SHAPES[:2]:
        for m, p in ((12, 60), (30, 200), (60, 500)):
            for seed in range(3):
                members, racks = generate(100 + seed, m, p, 4, **shape)  # type: ignore[arg-type]
                current = assign_range(members, racks)
                joined = generate(200 + seed, 2, p, 4, **shape)[0]  # type: ignore[arg-type]
                group = [x for i, x in enumerate(members) if i % 5] + [
                    Member(f"new-{k}-{x.member_id}", "app", x.rack, members[k].topics)
                    for k, x in enumerate(joined)
                ]
                kept = {x.member_id: current[x.member_id] for x in group if x.member_id in current}
                path = work / f"moves-{len(cases)}.group"
                write_group(path, group, racks, kept)
                cases.append((f"{label}, {m} x {p}", group, racks, kept, path))
    results = run_java(java, "cooperative-sticky", 0, 1, [c[4] for c in cases]) if java else []
    rows: dict[str, list[int]] = {}
    tally = {"better": 0, "same": 0, "worse": 0}
    for n, (label, group, racks, kept, _) in enumerate(cases):
        ours = assign_cooperative_sticky(group, racks, kept)
        mine = (balance(group, ours)[1], cross_rack(group, ours, racks), moves(group, kept, ours))
        theirs = (-1, -1, -1)
        if results:
            target = results[n][1]
            theirs = (
                balance(group, target)[1],
                cross_rack(group, target, racks),
                moves(group, kept, target),
            )
            tally["better" if mine < theirs else "same" if mine == theirs else "worse"] += 1
        row = rows.setdefault(label, [0] * 6)
        for k, v in enumerate((*mine, *theirs)):
            row[k] += v
    print(f"{'group (3 seeds each)':<26}{'score ours/java':>18}{'cross ours/java':>18}"
          f"{'moves ours/java':>18}")  # fmt: skip
    for label, r in rows.items():
        print(
            f"{label:<26}{f'{r[0]} / {r[3]}':>18}{f'{r[1]} / {r[4]}':>18}{f'{r[2]} / {r[5]}':>18}"
        )
    if results:
        print(
            f"ours vs Java over {len(cases)} groups, (score, cross-rack, moves) in that order: "
            f"better {tally['better']}, same {tally['same']}, worse {tally['worse']}"
        )


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="selfheal-consumer-bench-"))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{os.cpu_count()} cores, load average {load} (shared machine: CPU times are steadier)")
    try:
        java = java_ready()
        range_figures(java, work)
        sticky_figures(java, work)
        sticky_move_figures(java, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
