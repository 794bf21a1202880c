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
from sandbox.state import SandboxState

# Tests run the product on the sandbox as the root CLI does: its defaults plugged in.
install_sandbox_defaults()

SELFHEAL = [sys.executable, "-m", "selfheal.cli"]


def _bring_up(work_dir: Path, **kwargs) -> SandboxState:
    return cluster.up(work_dir, progress=lambda m: print(f"[sandbox] {m}", file=sys.stderr),
                      **kwargs)


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
