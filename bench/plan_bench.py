"""`selfheal plan offline|disks|leaders` on the issue's reference cluster and its tenth.

Full size: 1,000 brokers x 12 log dirs over 10 racks, 100,000 partitions at RF 3
(300,000 replicas), one failed dir per 50 brokers, skewed disks (bench/synthetic.py).
Each run is the real CLI in a fresh process, stdout discarded: wall time from spawn to
exit (interpreter start, reading and validating the snapshot, planning, writing the
JSON) and that process's peak RSS (wait4). The target: under 2 s and 2 GiB each.
The machine is shared, so each figure is run several times; best and median are shown.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import synthetic

PLANNERS = ("offline", "disks", "leaders")
SIZES = (("1/10", synthetic.TENTH), ("full", synthetic.FULL))
LIMIT_SECONDS = 2.0
LIMIT_BYTES = 2 << 30


def selfheal() -> list[str]:
    script = Path(sys.executable).with_name("selfheal")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys, selfheal.cli as c; sys.exit(c.main())"]


def measure(command: list[str]) -> tuple[float, int, int]:
    """(wall seconds, peak RSS bytes, exit code) of one fresh process."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0 and proc.stderr is not None:
        sys.stderr.write(proc.stderr.read().decode(errors="replace"))
    rss = usage.ru_maxrss * 1024 if sys.platform != "darwin" else usage.ru_maxrss
    return wall, rss, proc.returncode


def main(repeats: int = 5) -> None:
    work = Path(tempfile.mkdtemp(prefix="selfheal-bench-"))
    try:
        rows: list[tuple[str, str, float, float, int, bool]] = []
        for label, size in SIZES:
            t = time.perf_counter()
            path = synthetic.write(work / f"snapshot-{label.replace('/', '_')}.json", **size)
            mib = path.stat().st_size / (1 << 20)
            print(
                f"snapshot {label}: {size['brokers']} brokers, {size['partitions']} partitions, "
                f"{mib:.1f} MiB JSON (generated in {time.perf_counter() - t:.1f} s)",
                flush=True,
            )
            for planner in PLANNERS:
                runs = [
                    measure([*selfheal(), "plan", planner, "--snapshot", str(path)])
                    for _ in range(repeats)
                ]
                ok = all(code == 0 for _, _, code in runs)
                walls = sorted(w for w, _, _ in runs)
                rss = max(r for _, r, _ in runs)
                rows.append((planner, label, walls[0], walls[len(walls) // 2], rss, ok))
        print()
        print(f"wall time over {repeats} runs each; peak RSS is the largest of them")
        head = f"{'planner':<10}{'size':<7}{'best s':>8}{'median s':>10}{'peak RSS MiB':>14}"
        print(f"{head}  under 2 s and 2 GiB (median)")
        for planner, label, best, median, rss, ok in rows:
            verdict = "yes" if ok and median < LIMIT_SECONDS and rss < LIMIT_BYTES else "NO"
            print(
                f"{planner:<10}{label:<7}{best:>8.2f}{median:>10.2f}{rss / (1 << 20):>14.0f}"
                f"  {verdict}"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
