"""Where the test suite's time goes: `make test` leaves its JUnit report in
``.make/junit.xml``; this sums it per module (setup, call and teardown together), the
slowest first, with the share of the whole.

    python -m bench.suite_times [--top 30] [.make/junit.xml]
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def per_module(report: Path) -> dict[str, tuple[float, int]]:
    """{module path: (seconds, tests)} from a JUnit XML report."""
    seconds: dict[str, float] = defaultdict(float)
    tests: dict[str, int] = defaultdict(int)
    for case in ET.parse(report).getroot().iter("testcase"):
        module = case.get("classname", "").split("::")[0]
        parts = module.split(".")
        # classname is dotted: tests.e2e.test_x[.Class]; the module is up to test_*
        cut = next((i for i, p in enumerate(parts) if p.startswith("test_")), len(parts) - 1)
        name = "/".join(parts[:cut + 1]) + ".py"
        seconds[name] += float(case.get("time") or 0.0)
        tests[name] += 1
    return {m: (seconds[m], tests[m]) for m in seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", nargs="?", default=".make/junit.xml", type=Path,
                        help="the JUnit XML report (default: %(default)s)")
    parser.add_argument("--top", type=int, default=30, help="modules to list")
    args = parser.parse_args(argv)
    if not args.report.is_file():
        print(f"no report at {args.report}: run `make test` first (it writes one)",
              file=sys.stderr)
        return 2
    modules = per_module(args.report)
    whole = sum(s for s, _ in modules.values()) or 1.0
    print(f"{'module':60} {'tests':>5} {'s':>8} {'share':>6}")
    for name, (secs, count) in sorted(modules.items(), key=lambda kv: -kv[1][0])[:args.top]:
        print(f"{name:60} {count:5d} {secs:8.1f} {secs / whole:6.1%}")
    print(f"{'all ' + str(len(modules)) + ' modules':60} "
          f"{sum(c for _, c in modules.values()):5d} {whole:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
