"""`make dashboards`: write every dashboard's JSON to dashboards/json/ (committed).

``python -m dashboards.build --check`` writes nothing and exits 1 when a committed file
differs from what the code builds (a unit test runs the same check).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from grafanalib._gen import DashboardEncoder
from grafanalib.core import Dashboard

from dashboards import cluster_health, disks, pipeline, racks, remediation

JSON_DIR = Path(__file__).with_name("json")
# file name -> the module with its UID, panels() and build()
MODULES: dict[str, ModuleType] = {
    "cluster-health": cluster_health,
    "disks": disks,
    "racks": racks,
    "remediation": remediation,
    "pipeline": pipeline,
}
DASHBOARDS: dict[str, Callable[[], Dashboard]] = {n: m.build for n, m in MODULES.items()}


def render(board: Dashboard) -> str:
    """The dashboard as Grafana's JSON model, keys sorted, so the file is stable."""
    return json.dumps(board.to_json_data(), cls=DashboardEncoder, sort_keys=True,
                      indent=2) + "\n"


def rendered() -> dict[Path, str]:
    return {JSON_DIR / f"{name}.json": render(build()) for name, build in DASHBOARDS.items()}


def stale() -> list[Path]:
    """Committed files that differ from the code, or are missing."""
    return [path for path, text in rendered().items()
            if not path.exists() or path.read_text() != text]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dashboards.build", description=__doc__)
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if dashboards/json/ is stale")
    args = parser.parse_args(argv)
    if args.check:
        old = stale()
        for path in old:
            print(f"{path} is stale; run `make dashboards`", file=sys.stderr)
        return 1 if old else 0
    JSON_DIR.mkdir(exist_ok=True)
    for path, text in rendered().items():
        path.write_text(text)
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
