"""The secured sandbox of the tests that bring up their own (doctor, heal): SASL_SSL with
SCRAM-SHA-512 and an authorizer with no allow-everyone, on Kafka 4.4 KRaft by default or
3.9 ZooKeeper mode (ZooKeeper with SASL too); taken down by PID after the module."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from sandbox import cluster, grants, secure_zk
from sandbox.state import SandboxState
from tests.conftest import SELFHEAL


@contextmanager
def secured_sandbox(tmp_path_factory: pytest.TempPathFactory, folder: str,
                    **kwargs: object) -> Iterator[SandboxState]:
    state = cluster.up(tmp_path_factory.mktemp(folder), security="sasl_ssl",
                       **kwargs)  # type: ignore[arg-type]
    try:
        yield state
    finally:
        cluster.down(state.reload())


def sandbox_secrets(state: SandboxState) -> dict[str, str]:
    """Every secret the sandbox made: its users' passwords (Kafka's, and ZooKeeper's in
    ZooKeeper mode) and the action signing key."""
    security = state.security
    assert security is not None
    # every password file of the sandbox (the users', the exporters' scrape user's)
    found = {f"the secret in {name}": value for name, value in security.secrets().items()}
    if state.mode == "zk":
        found.update(secure_zk.passwords(security))
    found["the action signing key"] = str(state.action_signing_key)
    return found


def doctor(state: SandboxState, principal: str, *args: str, config: Path | None = None,
           **env: str) -> subprocess.CompletedProcess[str]:
    """`selfheal doctor` with ``principal``'s config (or ``config``); no secret of the
    sandbox may be in what it prints."""
    security = state.security
    assert security is not None
    full = {**os.environ, "SELFHEAL_SANDBOX_DIR": state.work_dir,
            "SELFHEAL_CONFIG": str(config or grants.config_file(security, principal)), **env}
    out = subprocess.run([*SELFHEAL, "doctor", "--timeout", "5", *args], capture_output=True,
                         text=True, env=full, timeout=180)
    leaked = [what for what, s in sandbox_secrets(state).items()
              if s in out.stdout + out.stderr]
    assert leaked == [], "a secret leaked"
    return out


def statuses(out: subprocess.CompletedProcess[str]) -> dict[str, dict[str, str]]:
    return {c["check"]: c for c in json.loads(out.stdout)["checks"]}
