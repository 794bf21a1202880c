"""`selfheal plan` start-up: a run that names its command imports that command alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from selfheal import cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["plan", "offline", "--snapshot", "s.json"], "plan"),
        (["--config", "c.toml", "plan", "disks"], "plan"),
        (["--config=c.toml", "serve"], "serve"),
        (["--conf", "c.toml", "collect", "zk"], "collect"),  # argparse's prefix of --config
        (["--help", "plan"], None),  # the help lists every command
        (["-h"], None),
        (["nope"], None),
        (["--config"], None),
        ([], None),
    ],
)
def test_the_command_is_found_only_where_the_parser_would_not_differ(argv, command):
    assert cli.command_of(argv) == command


def test_every_command_module_adds_its_command():
    import argparse

    for command, module in cli.COMMAND_MODULES.items():
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers(dest="command")
        __import__(module, fromlist=["register"]).register(sub)
        assert list(sub.choices) == [command], module


def test_a_plan_run_imports_neither_the_sandbox_nor_the_other_commands(tmp_path):
    probe = (
        "import sys, selfheal.cli as c\n"
        "sys.argv = ['selfheal', 'plan', 'offline', '--snapshot', sys.argv[1]]\n"
        "code = c.main()\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('sandbox', 'streams',"
        " 'remediation.service', 'remediation.executor', 'core.config', 'urllib.request',"
        " 'ssl', 'secrets')))\n"
        "print(code, loaded, file=sys.stderr)\n"
    )
    snapshot = tmp_path / "s.json"
    snapshot.write_text(
        '{"version": 1, "cluster_id": "c", "taken_at": "t", "brokers": [{"id": 0, '
        '"alive": true, "log_dirs": [{"path": "/d", "online": true}]}], "partitions": []}'
    )
    done = subprocess.run([sys.executable, "-c", probe, str(snapshot)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "0 []"
    assert '"partitions": []' in done.stdout
