"""The layers can be drawn: schemas -> core -> streams | remediation -> sandbox, bench, CLI.

Every import in the product's modules is read (top-level and inside functions alike), so
an upward import, or the product reaching for the sandbox, fails here by name.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("schemas", "core", "streams", "remediation")
# Package -> the project packages it may import (besides itself).
ALLOWED: dict[str, set[str]] = {
    "schemas": set(),
    "core": {"schemas"},
    "streams": {"schemas", "core"},
    "remediation": {"schemas", "core"},
    "dashboards": {"schemas", "core"},
}
PROJECT = {"schemas", "core", "streams", "remediation", "dashboards", "sandbox", "bench",
           "selfheal", "tests"}


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def _violations(package: str) -> list[str]:
    out = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for line, module in _imports(path):
            top = module.split(".")[0]
            if top in PROJECT and top != package and top not in ALLOWED[package]:
                out.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    return out


def test_no_product_module_imports_a_layer_above_it_or_the_sandbox():
    problems = [p for package in ALLOWED for p in _violations(package)]
    assert problems == []


def test_the_walk_sees_imports_inside_functions():
    # The check must not be fooled by the lazy imports the CLI modules use.
    sample = ROOT / "remediation" / "service" / "cli.py"
    assert any(m.startswith("core.") for _, m in _imports(sample))
    assert _imports(sample)[-1][0] > 20


def test_the_product_runs_with_no_sandbox_on_disk():
    """With the sandbox package absent, the CLI loads, config has no cluster, commands import."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "sys.modules['sandbox'] = None  # as if sandbox/ were not on disk\n"
        "import selfheal.cli as c\n"
        "assert c.install_sandbox_defaults() is False\n"
        "from core.config import load\n"
        "cfg = load(env={})\n"
        "assert cfg.cluster.bootstrap_servers is None, cfg\n"
        "import streams.collect.cli, streams.cli, remediation.service.cli\n"
        "import remediation.executor.cli, remediation.plan.cli\n"
        "assert not any(m.startswith('sandbox.') for m in sys.modules), 'sandbox imported'\n"
        "c.build_parser()\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, text=True,
                            capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
