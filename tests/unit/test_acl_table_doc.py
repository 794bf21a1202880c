"""docs/security.md's ACL table is core/acls.py's: one table feeds the sandbox's grants,
the doctor and the page."""

from __future__ import annotations

from pathlib import Path

from core.acls import TABLE

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def test_the_documented_acl_table_is_core_acls():
    rows = [line.strip("|").split("|") for line in DOC.read_text().splitlines()
            if line.startswith("| ") and not line.startswith("| process")]
    documented = [tuple(c.strip().strip("`") for c in cells[:6]) for cells in rows]
    assert documented == [(a.process, a.on, a.resource, a.name, a.pattern, a.operation)
                          for a in TABLE]
