"""Shared fixtures: one real sandbox cluster for every integration and e2e test.

It comes up once per session in a temporary folder (free ports, so two runs never collide)
and is taken down by PID at the end, whatever the tests did.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox import cluster
from sandbox.defaults import install as install_sandbox_defaults
from sandbox.jvm import small_machine_env
from sandbox.state import SandboxState

# Tests run the product on the sandbox as the root CLI does: its defaults plugged in.
install_sandbox_defaults()
# Every Spark driver the tests start, in this process or a child, with the sandbox's JVM
# options for a small machine (sandbox/jvm.py).
os.environ.update(small_machine_env(os.environ))

# pytest-xdist's workers run from a __main__ with neither a spec nor a file, which
# pyspark.sql.connect (Great Expectations imports it) takes for a doctest run and exits
# on ("Skipping doctests", SystemExit 0), failing every test that builds the GX suites.
_main = sys.modules["__main__"]
if getattr(_main, "__spec__", None) is None and not hasattr(_main, "__file__"):
    _main.__file__ = sys.argv[0] or "pytest-xdist-worker"

SELFHEAL = [sys.executable, "-m", "selfheal.cli"]


def _bring_up(work_dir: Path, **kwargs) -> SandboxState:
    return cluster.up(work_dir, progress=lambda m: print(f"[sandbox] {m}", file=sys.stderr),
                      **kwargs)


# `make test` runs two pytest-xdist workers (`--dist loadscope`), each with sandboxes of
# its own. One worker takes the chaos suite in order (two chaos loops at once would
# starve each other's timings); then both take modules one at a time (a module's
# fixtures are set up once), in the order below: the slow ones first, so the run does
# not end waiting on one of them.
ONE_WORKER = "chaos"
_ONE_WORKER_SUITES = ("chaos",)
_ORDER = ("chaos", "e2e", "airflow", "integration", "dashboards", "unit")


def _suite(nodeid: str) -> str:
    parts = nodeid.split("::")[0].split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else ""


def scope_of(nodeid: str) -> str:
    """The unit one worker runs: the chaos suite together, else the module."""
    return ONE_WORKER if _suite(nodeid) in _ONE_WORKER_SUITES else nodeid.split("::")[0]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        suite = _suite(item.nodeid)
        return _ORDER.index(suite) if suite in _ORDER else len(_ORDER)

    items.sort(key=rank)  # stable: modules and tests keep their own order


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    # xdist's loadgroup marks tests by rewriting their node ids, which pytest 9 ignores;
    # a scheduler that names the scope itself does not depend on that.
    from xdist.scheduler import LoadScopeScheduling

    class ChaosOnOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return ChaosOnOneWorker(config, log)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """What the whole-loop tests measured, one line per test: `record_property("figures",
    {"what": ..., name: value})` in a test (the chaos scenarios: tests/chaos/conftest.py).
    They are figures, not assertions (performance is asserted nowhere in the suite:
    bench/ measures it); they travel with the test's report, through xdist too."""
    reports = [r for rs in terminalreporter.stats.values() for r in rs
               if isinstance(r, pytest.TestReport)]
    outcome = {r.nodeid: r.outcome for r in reports if r.when == "call"}
    lines = []
    for r in reports:
        for key, figures in r.user_properties if r.when == "teardown" else ():
            if key == "figures":
                text = ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}"
                                 for k, v in figures.items() if k != "what")
                lines.append(f"{figures['what']:<20} {outcome.get(r.nodeid, '?'):<7} "
                             f"{r.nodeid.split('::')[-1]}: {text}")
    if lines:
        terminalreporter.section("what the whole-loop tests measured")
        for line in sorted(lines):
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxState]:
    """ZooKeeper + 3 brokers x 2 log dirs over 3 racks; shared, so tests heal what they break."""
    state = _bring_up(tmp_path_factory.mktemp("sandbox-zk"))
    try:
        yield state
    finally:
        cluster.down(state.reload())


@pytest.fixture(scope="session")
def kraft_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxState]:
    """The same layout in KRaft mode (KIP-858 JBOD), only for the tests that ask for it."""
    state = _bring_up(tmp_path_factory.mktemp("sandbox-kraft"), mode="kraft")
    try:
        yield state
    finally:
        cluster.down(state.reload())


@pytest.fixture(scope="module")
def local_spark(request: pytest.FixtureRequest) -> Iterator[object]:
    """A plain Spark session in this process with the real Kafka connector (a driver JVM
    per test module, stopped by PID after it), for what only Spark itself can say."""
    from streams.spark import session, stop

    spark = session(f"selfheal-{request.module.__name__.rsplit('.', 1)[-1]}",
                    master="local[1]")
    try:
        yield spark
    finally:
        stop(spark)


def run_cli(args: list[str], state: SandboxState | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the real `selfheal` command; with ``state``, aimed at that sandbox by environment."""
    env = dict(os.environ)
    if state is not None:
        env["SELFHEAL_SANDBOX_DIR"] = state.work_dir
    return subprocess.run(SELFHEAL + args, capture_output=True, text=True, env=env,
                          timeout=timeout)
