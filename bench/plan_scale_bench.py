"""`selfheal plan offline|disks|leaders` at Cruise Control's published worst case.

Cruise Control's issue #1592: 215 brokers and 2.8M replicas (933,000 partitions at RF 3,
a ~242 MB snapshot from bench/synthetic.py), and the issue's 300,000-replica reference
cluster (1,000 brokers, 100,000 partitions). Each run is the whole CLI in a fresh
process (`python -m selfheal.cli plan P --snapshot FILE`, stdout discarded): wall time
from spawn to exit and that process's peak RSS (wait4), once with the compiled core
(docs/native.md) and once on the Python reference (`SELFHEAL_NATIVE=0`), whose plans
must be the same bytes (checked here too). The targets (issue 33): 1 s and 1 GiB at
2.8M replicas, 0.2 s at 300k. The machine is shared, so each figure is
run three times; best and median are shown, with the load average before and after (the
machine is shared: wall time grows with the load, CPU time much less). Then, for the
2.8M snapshot, the CPU seconds of each phase inside one process (start-up, measured on
its own, and exit excluded): reading and checking, the model's sums where the planner
asks for them (per broker for offline, per dir for disks), the plan and its JSON.

`python -m bench.plan_scale_bench [DIR]` keeps the generated snapshots in DIR (made if
missing, reused when there), since generating the big one takes a minute or two.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import synthetic

PLANNERS = ("offline", "disks", "leaders")
# (label, generate() arguments, time limit in seconds, RSS limit in bytes or None)
SIZES: tuple[tuple[str, dict[str, int], float, int | None], ...] = (
    ("2.8M", {"brokers": 215, "partitions": 933_000}, 1.0, 1 << 30),
    ("300k", synthetic.FULL, 0.2, None),
)
# The two paths: the compiled core where it is built, and the pure-Python reference.
MODES = {"native": "1", "python": "0"}
REPEATS = 3
CLI = (sys.executable, "-m", "selfheal.cli")


def measure(command: list[str], native: str = "1") -> tuple[float, float, int, int]:
    """(wall seconds, CPU seconds, peak RSS bytes, exit code) of one fresh process. CPU
    time (user + system) is the steadier figure when other work shares the cores."""
    env = {**os.environ, "SELFHEAL_NATIVE": native}
    start = time.perf_counter()
    proc = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0 and proc.stderr is not None:
        sys.stderr.write(proc.stderr.read().decode(errors="replace"))
    if proc.stderr is not None:
        proc.stderr.close()
    rss = usage.ru_maxrss * 1024 if sys.platform != "darwin" else usage.ru_maxrss
    return wall, usage.ru_utime + usage.ru_stime, rss, code


_GENERATE = "import json, sys; from bench import synthetic; " \
    "synthetic.write(sys.argv[1], **json.loads(sys.argv[2]))"


def snapshot(folder: Path, label: str, size: dict[str, int]) -> Path:
    path = folder / f"snapshot-{label}.json"
    if not path.exists():
        t = time.perf_counter()
        partial = path.with_suffix(".partial")
        # In a child process: on Linux a child's peak RSS (wait4) starts from its
        # parent's at fork, and making the 2.8M document takes ~1 GiB, which every
        # measured run would then report as its own peak.
        subprocess.run(
            [sys.executable, "-c", _GENERATE, str(partial), json.dumps(size)], check=True
        )
        partial.rename(path)
        print(f"generated {path.name} in {time.perf_counter() - t:.0f} s", flush=True)
    mib = path.stat().st_size / (1 << 20)
    print(
        f"snapshot {label}: {size['brokers']} brokers, {size['partitions']} partitions, "
        f"{mib:.0f} MiB JSON",
        flush=True,
    )
    return path


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.1f} {five:.1f} {fifteen:.1f} on {os.cpu_count()} cores"


# Run in a fresh process by `phases`: the CPU seconds of each step of one plan.
_PHASES = """
import gc, json, sys, time
gc.disable()
from core.model import ClusterModel
from core.plan import disks, leaders, offline
planner, path = sys.argv[1], sys.argv[2]
out = []
def step(label, f, *args):
    t = time.process_time()
    value = f(*args)
    out.append(f"{label} {time.process_time() - t:.2f}")
    return value
# As the CLI reads: the partitions as columns where the core is built.
model = step("read+check", ClusterModel.load, path, True)
if planner == "offline":
    step("broker sums", lambda: model.broker_totals)
elif planner == "disks":
    step("dir sums", lambda: model.dir_bytes)
if planner == "offline":
    plan = step("plan", offline.plan_offline, model)
    step("json", lambda: json.dumps(plan.to_json()))
else:  # as the CLI: the JSON text, written by the core where built
    step("plan+json", {"leaders": leaders.plan_json, "disks": disks.plan_json}[planner], model)
print(", ".join(out))
"""


def phases(planner: str, path: Path, native: str = "1") -> str:
    """CPU seconds per phase of one plan, measured inside a fresh process."""
    done = subprocess.run(
        [sys.executable, "-c", _PHASES, planner, str(path)],
        capture_output=True, text=True, check=False,
        env={**os.environ, "SELFHEAL_NATIVE": native},
    )
    return done.stdout.strip() if done.returncode == 0 else f"failed: {done.stderr[-200:]}"


def compiled() -> None:
    """Bytecode for the packages the CLI imports, as an installed package has it: where
    none is written (PYTHONDONTWRITEBYTECODE, a fresh checkout) every run would compile
    the changed modules again, ~30 ms of a 0.2 s run."""
    root = Path(__file__).resolve().parents[1]
    for package in ("schemas", "core", "remediation", "selfheal"):
        compileall.compile_dir(root / package, quiet=1)


def run(folder: Path, repeats: int = REPEATS, planners: tuple[str, ...] = PLANNERS) -> bool:
    """Measure `planners` on every size; True when all meet their targets."""
    compiled()
    rows: list[tuple[str, str, str, float, float, float, int, bool]] = []
    print(f"load average (1, 5, 15 min) before: {load_average()}", flush=True)
    big: Path | None = None
    for label, size, limit_s, limit_rss in SIZES:
        path = snapshot(folder, label, size)
        big = big or path
        for planner, mode in ((p, m) for p in planners for m in MODES):
            command = [*CLI, "plan", planner, "--snapshot", str(path)]
            runs = [measure(command, MODES[mode]) for _ in range(repeats)]
            walls = sorted(w for w, _, _, _ in runs)
            cpu = statistics.median(c for _, c, _, _ in runs)
            rss = max(r for _, _, r, _ in runs)
            median = statistics.median(walls)
            ok = (
                all(code == 0 for *_, code in runs)
                and median < limit_s
                and (limit_rss is None or rss < limit_rss)
            )
            rows.append((planner, mode, label, walls[0], median, cpu, rss, ok))
            print(
                f"  {planner:<8} {mode:<7} {label:<5} best {walls[0]:.2f} s, "
                f"median {median:.2f} s, "
                f"CPU {cpu:.2f} s, peak {rss / (1 << 20):.0f} MiB",
                flush=True,
            )
    print()
    print(f"wall time over {repeats} runs each (CPU: median); peak RSS is the largest of them")
    head = f"{'planner':<10}{'path':<8}{'size':<7}"
    head += f"{'best s':>8}{'median s':>10}{'CPU s':>7}{'peak MiB':>10}"
    print(f"{head}  target")
    for planner, mode, label, best, median, cpu, rss, ok in rows:
        print(
            f"{planner:<10}{mode:<8}{label:<7}{best:>8.2f}{median:>10.2f}{cpu:>7.2f}"
            f"{rss / (1 << 20):>10.0f}"
            f"  {'met' if ok else 'MISSED'}"
        )
    print("targets: 2.8M under 1 s and 1 GiB, 300k under 0.2 s (median)")
    same = all(same_plans(planner, path) for planner in planners
               for path in sorted(folder.glob("snapshot-*.json")))
    print(f"plans native vs python: {'byte-identical' if same else 'DIFFERENT'}")
    print(f"load average (1, 5, 15 min) after: {load_average()}")
    startup = statistics.median(
        c for _, c, _, _ in (measure([*CLI, "plan", "offline", "--help"]) for _ in range(repeats))
    )
    print(f"start-up (plan offline --help): CPU {startup:.2f} s")
    if big is not None:
        print(f"CPU seconds per phase, {SIZES[0][0]}, one run each:")
        for planner, mode in ((p, m) for p in planners for m in MODES):
            print(f"  {planner:<8} {mode:<7} {phases(planner, big, MODES[mode])}", flush=True)
    return same and all(ok for *_, ok in rows)


def same_plans(planner: str, path: Path) -> bool:
    """The plan's bytes are the same on both paths."""
    out = [
        subprocess.run(
            [*CLI, "plan", planner, "--snapshot", str(path)], capture_output=True, check=True,
            env={**os.environ, "SELFHEAL_NATIVE": native},
        ).stdout
        for native in MODES.values()
    ]
    return out[0] == out[1]


def main(repeats: int = REPEATS, planners: tuple[str, ...] = PLANNERS) -> None:
    work = Path(tempfile.mkdtemp(prefix="selfheal-scale-bench-"))
    try:
        run(work, repeats, planners)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        prog="python -m bench.plan_scale_bench",
        description="plan offline|disks|leaders at 2.8M and 300k replicas, whole CLI, "
        "compiled core and Python reference side by side (CPU-heavy: a few minutes)",
    )
    parser.add_argument(
        "dir", nargs="?", type=Path,
        help="keep the generated snapshots here (made if missing, reused when there); "
        "default: a temporary directory, removed afterwards",
    )  # fmt: skip
    parser.add_argument(
        "--planners", default=",".join(PLANNERS),
        help="comma-separated, of offline,disks,leaders (default: all three)",
    )  # fmt: skip
    args = parser.parse_args()
    chosen = tuple(p for p in args.planners.split(",") if p)
    if not chosen or set(chosen) - set(PLANNERS):
        parser.error(f"--planners: want some of {','.join(PLANNERS)}, got {args.planners!r}")
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
        run(args.dir, planners=chosen)
    else:
        main(planners=chosen)
