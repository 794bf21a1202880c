"""README's Kafka version table, made from what the last `make test` proved.

Tests call `tests.conftest.prove(...)`; the run writes `.make/kafka-matrix.json`; `make
test`, after a green run, runs `python -m tests.matrix` to rewrite the table between the
markers in README.md. Nothing in the table is typed by hand.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from sandbox import versions

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
START, END = "<!-- kafka-matrix:start -->", "<!-- kafka-matrix:end -->"
COLUMNS = ("detect", "fix", "disk moves", "leaders", "consumer locality", "chaos")


def table(proven: list[dict]) -> str:
    """One row per Kafka line and mode the sandbox runs; a cell names the passed tests'
    count that proved it there, or says it was not proven."""
    rows = ["| Kafka | mode | " + " | ".join(COLUMNS) + " |",
            "|---|---|" + "---|" * len(COLUMNS)]
    for line in versions.LINES.values():
        for mode in line.modes:
            cells = []
            for column in COLUMNS:
                tests = {p["test"] for p in proven if p["kafka"] == line.line
                         and p["mode"] == mode and column in p["capabilities"]}
                cells.append(f"yes ({len(tests)})" if tests else "not proven")
            name = "ZooKeeper" if mode == "zk" else "KRaft"
            rows.append(f"| {line.version} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def rewrite(readme: str, proven: list[dict]) -> str:
    if START not in readme or END not in readme:
        raise SystemExit(f"README.md has no {START} ... {END} block to fill")
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{table(proven)}\n{END}{tail}"


def main(argv: list[str]) -> int:
    source = Path(argv[0]) if argv else ROOT / ".make" / "kafka-matrix.json"
    proven = json.loads(source.read_text())
    README.write_text(rewrite(README.read_text(), proven))
    print(f"README.md: the Kafka table from {len(proven)} proofs in {source}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
