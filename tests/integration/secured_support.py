"""The secured sandbox of the tests that bring up their own (doctor, heal): SASL_SSL with
SCRAM-SHA-512 and an authorizer with no allow-everyone, on Kafka 4.4 KRaft by default or
3.9 ZooKeeper mode (ZooKeeper with SASL too); taken down by PID after the module."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from sandbox import cluster, secure_zk
from sandbox.state import SandboxState


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
    found = {f"password of {p}": security.password(p) for p in security.principals}
    if state.mode == "zk":
        found.update(secure_zk.passwords(security))
    found["the action signing key"] = str(state.action_signing_key)
    return found
