"""serve's store belongs to one cluster: one file per cluster by default, and a store of
another cluster refused with what to do (real `selfheal serve` processes, on the sandbox)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from core.owner import claim_store
from remediation.executor.store import ActionStore
from sandbox.state import SandboxState
from tests.conftest import SELFHEAL
from tests.integration.test_clean_stops import TRACE, Proc, _clean, _env

pytestmark = pytest.mark.integration


def test_serve_refuses_a_store_of_another_cluster_saying_what_to_do(
        sandbox: SandboxState, tmp_path: Path) -> None:
    path = tmp_path / "actions.sqlite"
    with ActionStore(path) as store:
        claim_store(store, path, "another-cluster")
    result = subprocess.run([*SELFHEAL, "serve", "--port", "0", "--sqlite", str(path)],
                            capture_output=True, text=True, timeout=120, env=_env(sandbox))
    assert result.returncode == 2, result.stderr
    assert f"the action store {path} belongs to cluster another-cluster, this is cluster " \
           f"{sandbox.cluster_id}" in result.stderr
    assert not TRACE.search(result.stderr)


def test_serve_keeps_one_store_per_cluster_by_default(sandbox: SandboxState,
                                                       tmp_path: Path) -> None:
    env = _env(sandbox, XDG_STATE_HOME=str(tmp_path / "state"),
               SELFHEAL_SERVE_SQLITE_PATH="")
    env.pop("SELFHEAL_SERVE_SQLITE_PATH")
    serve = Proc(["serve", "--port", "0"], env)
    try:
        store = serve.wait_line(r"\(store (\S+)\)", 60).group(1)
        assert store == str(tmp_path / "state" / "kafka-selfheal" / "actions"
                            / f"{sandbox.cluster_id}.sqlite")
        serve.wait_line("active executor", 60)
    finally:
        code = serve.stop_group()
    _clean(serve, code)
    with ActionStore(Path(store)) as opened:
        assert opened.setting("cluster_id", lambda: "unset") == sandbox.cluster_id
