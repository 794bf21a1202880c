"""`selfheal doctor` on the plain sandbox: every check passes (no authorizer: every ACL
probe is allowed), and a client speaking the wrong protocol fails with what to do."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.conftest import SELFHEAL

pytestmark = pytest.mark.integration


def doctor(state, *args, **env):
    full = {**os.environ, "SELFHEAL_SANDBOX_DIR": state.work_dir, **env}
    return subprocess.run([*SELFHEAL, "doctor", "--timeout", "5", *args], capture_output=True,
                          text=True, env=full, timeout=120)


def test_the_sandbox_passes_every_check(sandbox):
    out = doctor(sandbox, "--json")
    report = json.loads(out.stdout)
    statuses = {c["check"]: c["status"] for c in report["checks"]}
    assert out.returncode == 0, out.stdout
    assert report["ok"] is True
    assert statuses["cluster"] == "ok" and statuses["zookeeper"] == "ok"
    assert statuses["signing key"] == "ok"
    probes = [name for name in statuses if name.startswith("acl ")]
    assert len(probes) == 4 and all(statuses[p] == "ok" for p in probes)
    assert any(name.startswith("exporter ") for name in statuses)
    assert not [n for n, s in statuses.items() if s == "fail"]


def test_tls_against_a_plaintext_listener_fails_in_one_line(sandbox):
    out = doctor(sandbox, SELFHEAL_CLUSTER_SECURITY_PROTOCOL="SSL")
    assert out.returncode == 1
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("FAIL cluster")]
    assert "as SSL" in line and " -> check " in line
