"""Shared fixtures: one real sandbox cluster for every integration and e2e test.

It comes up once per session in a temporary folder (free ports, so two runs never collide)
and is taken down by PID at the end, whatever the tests did.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


# `make test` runs three pytest-xdist workers (`--dist loadscope`), each with sandboxes
# of its own. One worker takes the chaos suite in order (two chaos loops at once would
# starve each other's timings); then all take modules one at a time (a module's
# fixtures are set up once), in the order below: the slow ones first, so the run does
# not end waiting on one of them.
ONE_WORKER = "chaos"
_ONE_WORKER_SUITES = ("chaos",)
_ORDER = ("chaos", "e2e", "airflow", "integration", "dashboards", "unit")
# The tests on a sandbox of their own (KRaft; Airflow's two racks) run together on one
# worker, which brings it up for the first and takes it down after the last (`_OnDemand`
# below): idle, a sandbox's four JVMs took ~0.09 of a core to the end of the run.
KRAFT = "kraft"  # tests on the KRaft sandbox: in a test_*_kraft.py module or test_kraft_*
KRAFT39 = "kraft39"  # tests on Kafka 3.9 in KRaft mode: in a test_*_kraft39.py module
SECURED = "secured"  # integration tests in a test_secured_*.py module


class _OnDemand:
    """A sandbox brought up for the first test that asks for it and taken down by PID
    after the last of the tests that follow it using it (the scheduler keeps them
    together: `scope_of`), or at the end of the session, whichever comes first."""

    def __init__(self, name: str, scope: str, folder: str, **kwargs: object) -> None:
        self.name, self.scope, self.folder, self.kwargs = name, scope, folder, kwargs
        self.state: SandboxState | None = None

    def get(self, tmp_path_factory: pytest.TempPathFactory) -> SandboxState:
        if self.state is None:
            self.state = _bring_up(tmp_path_factory.mktemp(self.folder), **self.kwargs)
        return self.state

    def down(self) -> None:
        state, self.state = self.state, None
        if state is not None:
            print(f"[sandbox] {self.name}: taking it down, its last test ran", file=sys.stderr)
            cluster.down(state.reload())


ON_DEMAND = {shared.name: shared for shared in (
    _OnDemand("kraft_sandbox", KRAFT, "sandbox-kraft", kafka="4.4", mode="kraft"),
    # the version matrix's third corner: the last line with both modes, in KRaft
    _OnDemand("kraft39_sandbox", KRAFT39, "sandbox-kraft39", kafka="3.9", mode="kraft"),
    # 3 brokers over 2 racks (brokers 0 and 2 share rack1): a partition can violate KIP-36
    # rack diversity, and leaders be uneven by rack while even by broker.
    _OnDemand("rack_sandbox", "airflow", "sandbox-airflow", racks=2, kafka="4.4", mode="kraft"),
    # SASL_SSL, 2 brokers x 1 dir over 2 racks: the doctor's and the secured sandbox's
    # own tests (each module brought up its own, ~20 s each)
    _OnDemand("secured_small_sandbox", SECURED, "sandbox-secured", brokers=2, log_dirs=1,
              racks=2, security="sasl_ssl"),
)}


def _suite(nodeid: str) -> str:
    parts = nodeid.split("::")[0].split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else ""


def scope_of(nodeid: str) -> str:
    """The unit one worker runs: the chaos suite together, the KRaft tests together, the
    Airflow suite together, the secured integration tests together, else the module."""
    suite = _suite(nodeid)
    if suite in _ONE_WORKER_SUITES:
        return ONE_WORKER
    module, _, name = nodeid.partition("::")
    if suite == "integration" and module.rsplit("/", 1)[-1].startswith(f"test_{SECURED}_"):
        return SECURED
    if suite != "unit" and module.endswith(f"_{KRAFT39}.py"):
        return KRAFT39
    if suite != "unit" and (module.endswith(f"_{KRAFT}.py")
                            or name.startswith(f"test_{KRAFT}_")):
        return KRAFT
    if suite == "airflow":
        return suite
    return module


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> tuple[int, bool]:
        suite = _suite(item.nodeid)
        # in a suite, the tests on a sandbox of their own first: they run in one row
        own = any(name in getattr(item, "fixturenames", ()) for name in ON_DEMAND)
        return (_ORDER.index(suite) if suite in _ORDER else len(_ORDER)), not own

    items.sort(key=rank)  # stable: modules and tests keep their own order
    misplaced = []
    for item in items:
        for name, shared in ON_DEMAND.items():
            uses = name in getattr(item, "fixturenames", ())
            together = scope_of(item.nodeid) == shared.scope
            if uses and not together:
                misplaced.append(f"{item.nodeid} uses {name}: name it so scope_of gives "
                                 f"{shared.scope!r}")
            elif together and not uses and shared.scope == KRAFT:
                misplaced.append(f"{item.nodeid} is named as a KRaft test but does not use "
                                 f"{name}: rename it")
    if misplaced:
        raise pytest.UsageError("tests on a sandbox of their own must run together "
                                "(tests/conftest.py):\n" + "\n".join(misplaced))


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    # xdist's loadgroup marks tests by rewriting their node ids, which pytest 9 ignores;
    # a scheduler that names the scope itself does not depend on that.
    from xdist.scheduler import LoadScopeScheduling

    class ChaosOnOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return ChaosOnOneWorker(config, log)


MATRIX = Path(__file__).resolve().parents[1] / ".make" / "kafka-matrix.json"


def prove(record_property: Any, state: SandboxState, *capabilities: str) -> None:
    """Record that this test, if it passes, proved ``capabilities`` (tests/matrix.py's
    columns) on the sandbox's Kafka line and mode; README's table is made from them."""
    record_property("proves", {"kafka": state.kafka, "mode": state.mode,
                               "capabilities": list(capabilities)})


def _write_matrix(reports: list[pytest.TestReport]) -> None:
    passed = {r.nodeid for r in reports if r.when == "call" and r.outcome == "passed"}
    proven = [dict(found, test=r.nodeid) for r in reports if r.when == "teardown"
              for key, found in r.user_properties if key == "proves" and r.nodeid in passed]
    MATRIX.parent.mkdir(exist_ok=True)
    MATRIX.write_text(json.dumps(proven, indent=1) + "\n")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """What the whole-loop tests measured, one line per test: `record_property("figures",
    {"what": ..., name: value})` in a test (the chaos scenarios: tests/chaos/conftest.py).
    They are figures, not assertions (performance is asserted nowhere in the suite:
    bench/ measures it); they travel with the test's report, through xdist too."""
    reports = [r for rs in terminalreporter.stats.values() for r in rs
               if isinstance(r, pytest.TestReport)]
    _write_matrix(reports)
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
    """Kafka 3.9 in ZooKeeper mode, 3 brokers x 2 log dirs over 3 racks; shared, so tests
    heal what they break."""
    state = _bring_up(tmp_path_factory.mktemp("sandbox-zk"), kafka="3.9", mode="zk")
    try:
        yield state
    finally:
        cluster.down(state.reload())


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    for name, shared in ON_DEMAND.items():
        if shared.state is not None and (
                nextitem is None or name not in getattr(nextitem, "fixturenames", ())):
            shared.down()


def pytest_sessionfinish(session: pytest.Session) -> None:
    for shared in ON_DEMAND.values():
        shared.down()


@pytest.fixture
def kraft_sandbox(tmp_path_factory: pytest.TempPathFactory) -> SandboxState:
    """The same layout on Kafka 4.4 (KRaft only, KIP-858 JBOD), for the tests that ask."""
    return ON_DEMAND["kraft_sandbox"].get(tmp_path_factory)


@pytest.fixture
def kraft39_sandbox(tmp_path_factory: pytest.TempPathFactory) -> SandboxState:
    """Kafka 3.9 in KRaft mode (static quorum, reload4j), for the version matrix."""
    return ON_DEMAND["kraft39_sandbox"].get(tmp_path_factory)


@pytest.fixture
def secured_small_sandbox(tmp_path_factory: pytest.TempPathFactory) -> SandboxState:
    """Kafka 4.4 KRaft with SASL_SSL (SCRAM-SHA-512, ACLs only): 2 brokers x 1 dir, 2 racks."""
    return ON_DEMAND["secured_small_sandbox"].get(tmp_path_factory)


@pytest.fixture
def rack_sandbox(tmp_path_factory: pytest.TempPathFactory) -> SandboxState:
    """Kafka 4.4 (KRaft), 3 brokers x 2 log dirs over 2 racks, for the Airflow tests."""
    return ON_DEMAND["rack_sandbox"].get(tmp_path_factory)


@pytest.fixture(scope="module")
def local_spark(request: pytest.FixtureRequest) -> Iterator[object]:
    """A plain Spark session in this process with the real Kafka connector (a driver JVM
    per test module, stopped by PID after it), for what only Spark itself can say."""
    from streams.spark import DRIVER_JAVA_OPTIONS_ENV, session, stop

    baseline = os.environ[DRIVER_JAVA_OPTIONS_ENV]
    # this start's class-data sharing options (sandbox/cds.py), not every later one's
    os.environ.update(small_machine_env(os.environ, share_classes=True))
    try:
        spark = session(f"selfheal-{request.module.__name__.rsplit('.', 1)[-1]}",
                        master="local[1]")
    finally:
        os.environ[DRIVER_JAVA_OPTIONS_ENV] = baseline
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
