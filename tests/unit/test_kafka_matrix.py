"""README's Kafka table is made from the proofs the test run recorded (tests/matrix.py)."""

from __future__ import annotations

import pytest

from tests import matrix

PROOFS = [
    {"kafka": "4.4", "mode": "kraft", "capabilities": ["detect", "fix"], "test": "a"},
    {"kafka": "4.4", "mode": "kraft", "capabilities": ["detect"], "test": "b"},
    {"kafka": "3.9", "mode": "zk", "capabilities": ["chaos"], "test": "c"},
]


def test_each_line_and_mode_is_a_row_and_each_cell_counts_the_tests_that_proved_it():
    rows = matrix.table(PROOFS).splitlines()
    assert rows[0].startswith("| Kafka | mode | detect | fix |")
    by_row = {tuple(c.strip() for c in r.split("|")[1:3]): r for r in rows[2:]}
    assert set(by_row) == {("3.9.2", "ZooKeeper"), ("3.9.2", "KRaft"), ("4.4.0", "KRaft")}
    cells = [c.strip() for c in by_row[("4.4.0", "KRaft")].split("|")[3:-1]]
    assert cells[:3] == ["yes (2)", "yes (1)", "not proven"]
    assert "not proven" not in by_row[("3.9.2", "ZooKeeper")].split("|")[-2]
    assert all(c.strip() == "not proven" for c in by_row[("3.9.2", "KRaft")].split("|")[3:-1])


def test_only_the_block_between_the_markers_is_rewritten():
    readme = f"intro\n{matrix.START}\nold table\n{matrix.END}\nrest\n"
    out = matrix.rewrite(readme, PROOFS)
    assert out.startswith("intro\n") and out.endswith(f"{matrix.END}\nrest\n")
    assert "old table" not in out and "| 4.4.0 | KRaft |" in out


def test_a_readme_without_the_markers_is_an_error_that_names_them():
    with pytest.raises(SystemExit, match="kafka-matrix:start"):
        matrix.rewrite("no table here\n", PROOFS)
