"""`selfheal doctor` where no cluster answers: one line per check with what to do, exit 1
on a failure, the same in --json, and no secret in either."""

from __future__ import annotations

import json
import subprocess
import sys

PASSWORD = "Doctor-Pa55"


def doctor(tmp_path, *args, **env):
    empty = tmp_path / "no-sandbox"
    empty.mkdir(exist_ok=True)
    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SELFHEAL_SANDBOX_DIR": str(empty),
            "PYTHONPATH": ":".join(sys.path)}
    return subprocess.run([sys.executable, "-m", "selfheal.cli", "doctor", *args],
                          capture_output=True, text=True, env={**base, **env}, timeout=120)


def test_nothing_configured_fails_with_what_to_set(tmp_path):
    out = doctor(tmp_path)
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert lines[0].startswith("ok   config")
    assert any(line.startswith("FAIL signing key") and "action_signing_key" in line
               for line in lines)
    assert "FAIL cluster: no [cluster] bootstrap_servers -> set it" in out.stdout


def test_a_missing_password_file_and_a_world_readable_one(tmp_path):
    open_file = tmp_path / "open.password"
    open_file.write_text(PASSWORD)
    open_file.chmod(0o644)
    out = doctor(tmp_path, "--json", SELFHEAL_CLUSTER_BOOTSTRAP_SERVERS="127.0.0.1:1",
                 SELFHEAL_CLUSTER_SECURITY_PROTOCOL="SASL_SSL",
                 SELFHEAL_CLUSTER_SECURITY_SASL_MECHANISM="SCRAM-SHA-512",
                 SELFHEAL_CLUSTER_SECURITY_USERNAME="selfheal",
                 SELFHEAL_CLUSTER_SECURITY_PASSWORD_FILE=str(tmp_path / "missing"),
                 SELFHEAL_CLUSTER_EXPORTER_SECURITY_USERNAME="prom",
                 SELFHEAL_CLUSTER_EXPORTER_SECURITY_PASSWORD_FILE=str(open_file))
    assert out.returncode == 1
    report = json.loads(out.stdout)
    by_name = {c["check"]: c for c in report["checks"]}
    assert report["ok"] is False
    assert by_name["[cluster.security] password_file"]["status"] == "fail"
    assert by_name["[cluster.exporter_security] password_file"] == {
        "check": "[cluster.exporter_security] password_file", "status": "warn",
        "detail": f"{open_file} is readable by every user", "fix": f"chmod 600 {open_file}"}
    assert "cannot read the password file" in by_name["cluster"]["detail"]
    assert PASSWORD not in out.stdout + out.stderr
