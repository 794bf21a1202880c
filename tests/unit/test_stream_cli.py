"""`selfheal stream` as a command: its help, and the mistakes it refuses before Spark starts."""

from __future__ import annotations

import os
import subprocess

from tests.conftest import SELFHEAL


def stream(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SELFHEAL, "stream", *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **(env or {})})


def test_help_says_what_goes_in_and_out_and_how_to_stop():
    done = stream("--help")
    assert done.returncode == 0
    for words in ("selfheal.broker-metrics", "selfheal.dead-letter", "selfheal.actions",
                  "--available-now", "--trigger", "--checkpoint", "proposes nothing twice"):
        assert words in done.stdout, words


def test_a_trigger_of_zero_seconds_is_refused_with_the_fix():
    done = stream("--trigger", "0")
    assert done.returncode == 2
    assert "--trigger must be more than 0 seconds, got 0.0" in done.stderr


def test_without_a_bus_it_says_how_to_configure_one(tmp_path):
    env = {"SELFHEAL_SANDBOX_DIR": str(tmp_path), "SELFHEAL_CONFIG": ""}
    env.update({k: "" for k in os.environ if k.startswith(("SELFHEAL_BUS_", "SELFHEAL_CLUSTER_"))})
    done = stream(env=env)
    assert done.returncode == 1, done.stderr
    assert "no event bus configured" in done.stderr and "selfheal sandbox up" in done.stderr
    assert "Traceback" not in done.stderr
