"""Packaging by role: the core install carries what collectors and `serve` need; Spark,
Great Expectations, Airflow and grafanalib come only with extras."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NO_EXTRAS = Path(__file__).parent / "without_extras"
EXTRA_PACKAGES = ("pyspark", "great-expectations", "pandas", "pyarrow", "apache-airflow",
                  "grafanalib")


def core_process(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{NO_EXTRAS}{os.pathsep}{ROOT}"}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          timeout=120, cwd=ROOT)


def test_the_core_dependencies_name_no_extra_package():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"])
    assert not [p for p in EXTRA_PACKAGES if p in core]
    extras = project["optional-dependencies"]
    assert {"spark", "airflow", "dashboards", "dev"} <= set(extras)
    assert "kafka-selfheal[spark,airflow,dashboards]" in extras["dev"]


def test_the_blocker_really_blocks():
    done = core_process("-c", "import pandas")
    assert done.returncode == 1 and "a core install has no extras" in done.stderr


def core_modules() -> list[str]:
    """Every module of the layers a collector host and `serve` run."""
    names = []
    for package in ("schemas", "core", "remediation", "streams/collect"):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_every_collector_and_serve_module_imports_without_extras():
    assert {"remediation.service.serve", "streams.collect.snapshots", "core.signing"} <= \
        set(core_modules())
    done = core_process("-c", "import importlib, sys\n"
                        f"for m in {core_modules()!r}: importlib.import_module(m)\n"
                        "print('imported', len(sys.modules))")
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("command", [["collect", "metrics"], ["collect", "zk"],
                                     ["collect", "snapshots"], ["serve"], ["execute"],
                                     ["plan", "offline"]])
def test_the_core_commands_answer_without_extras(command):
    done = core_process("-m", "selfheal.cli", *command, "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage: selfheal" in done.stdout
