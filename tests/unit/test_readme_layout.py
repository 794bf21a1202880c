"""README's layout table names exactly the top-level folders of the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _table_folders(readme: str) -> list[str]:
    section = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([^`/]+)/` \|", section, flags=re.MULTILINE)


def _top_level_folders() -> set[str]:
    # Tracked files only: caches, venvs and build output are no part of the layout.
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.splitlines()
    return {path.split("/", 1)[0] for path in tracked
            if "/" in path and not path.startswith(".")}


def test_the_layout_table_names_every_top_level_folder_and_no_other() -> None:
    named = _table_folders((ROOT / "README.md").read_text())
    assert len(named) == len(set(named)), f"a folder is named twice: {named}"
    actual = _top_level_folders()
    assert set(named) == actual, (
        f"README's layout table is out of date: missing {sorted(actual - set(named))}, "
        f"gone {sorted(set(named) - actual)}")


def test_only_the_layout_sections_rows_count() -> None:
    readme = ("intro\n## Layout\n\n| folder | x |\n|---|---|\n| `a/` | one |\n"
              "| `b/` | two |\n\n## Next\n| `c/` | no |\n")
    assert _table_folders(readme) == ["a", "b"]
