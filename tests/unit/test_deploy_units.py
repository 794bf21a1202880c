"""The systemd units in deploy/systemd/ run commands the CLI has, with the stop and restart
docs/operations.md promises, and secrets only from the environment file."""

from __future__ import annotations

import dataclasses
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from core.config import SECTIONS
from selfheal.cli import build_parser, command_of
from streams.spark import JARS_ENV

ROOT = Path(__file__).resolve().parents[2]
UNITS = ROOT / "deploy" / "systemd"
INSTALLED = "/opt/kafka-selfheal/venv/bin/selfheal"
SERVICES = sorted(UNITS.glob("*.service"))
# The Spark launcher's own variables (streams/spark.py), beside the configuration's.
SPARK_VARIABLES = {"SELFHEAL_SPARK_MASTER", JARS_ENV}


def parse_unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """A unit file as {section: {key: [values in order]}} (systemd repeats keys)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"{path.name}: {line!r} before any section"
        key, sep, value = line.partition("=")
        assert sep, f"{path.name}: {line!r} is not key=value"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def _config_variables() -> dict[str, bool]:
    """Every SELFHEAL_<SECTION>_<KEY> variable the configuration reads -> is it a secret."""
    return {f"SELFHEAL_{section.upper()}_{f.name.upper()}": bool(f.metadata.get("secret"))
            for section, cls in SECTIONS.items() for f in dataclasses.fields(cls)}


def test_every_process_of_the_guide_has_a_unit():
    commands = {" ".join(shlex.split(parse_unit(p)["Service"]["ExecStart"][0])[3:])
                for p in SERVICES}
    assert commands == {"collect metrics", "collect snapshots", "collect zk", "stream", "serve"}


@pytest.mark.parametrize("unit", SERVICES, ids=lambda p: p.name)
def test_the_command_line_parses_with_the_cli(unit):
    (exec_start,) = parse_unit(unit)["Service"]["ExecStart"]
    argv = shlex.split(exec_start.replace("%i", "prod-eu"))
    assert argv[0] == INSTALLED
    args = argv[1:]
    args_ns = build_parser(command_of(args)).parse_args(args)
    assert args_ns.global_config == "/etc/kafka-selfheal/prod-eu/selfheal.toml"
    assert callable(args_ns.func)


@pytest.mark.parametrize("unit", SERVICES, ids=lambda p: p.name)
def test_a_stop_is_sigterm_with_time_to_finish_and_a_crash_restarts(unit):
    parsed = parse_unit(unit)
    service = parsed["Service"]
    assert service["KillSignal"] == ["SIGTERM"]
    assert service["TimeoutStopSec"][0].endswith("s")
    assert service["Restart"] == ["on-failure"]
    assert "StartLimitBurst" in parsed["Unit"]
    assert parsed["Install"]["WantedBy"] == ["selfheal@%i.target"]


@pytest.mark.parametrize("unit", SERVICES, ids=lambda p: p.name)
def test_secrets_come_from_the_cluster_environment_file_whose_example_is_shipped(unit):
    service = parse_unit(unit)["Service"]
    assert service["EnvironmentFile"] == ["/etc/kafka-selfheal/%i/secrets.env"]
    known = _config_variables()
    for assignment in service.get("Environment", []):
        name = assignment.split("=", 1)[0]
        if name.startswith("SELFHEAL_"):
            assert name in known or name in SPARK_VARIABLES, \
                f"{unit.name} sets {name}, which nothing reads"
            assert not known.get(name), f"{unit.name} puts the secret {name} in the unit"


def test_the_environment_file_example_names_every_secret_and_nothing_else():
    example = (UNITS / "secrets.env.example").read_text(encoding="utf-8")
    named = {line.lstrip("# ").split("=", 1)[0] for line in example.splitlines()
             if "=" in line and line.lstrip("# ").startswith("SELFHEAL_")}
    secrets = {name for name, secret in _config_variables().items() if secret}
    assert named == secrets
    assert all(line.endswith("=") for line in example.splitlines()
               if line.startswith("SELFHEAL_")), "the example must hold no value"


def test_the_target_starts_every_unit_but_the_zookeeper_collector():
    wants = " ".join(parse_unit(UNITS / "selfheal@.target")["Unit"]["Wants"]).split()
    expected = {p.name.replace("@.service", "@%i.service") for p in SERVICES}
    assert set(wants) == expected - {"selfheal-collect-zk@%i.service"}


def test_systemd_analyze_verify_finds_nothing(tmp_path):
    # The units as installed, with the command pointing at this checkout's selfheal
    # (verify refuses a command that does not exist); any warning fails the test.
    selfheal = Path(shutil.which("selfheal", path=str(ROOT / ".venv" / "bin")) or "")
    assert selfheal.is_file(), "the venv has no selfheal script: run `make venv`"
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing: `make deps` installs the systemd package"
    for unit in UNITS.glob("selfheal*"):
        (tmp_path / unit.name).write_text(
            unit.read_text(encoding="utf-8").replace(INSTALLED, str(selfheal)),
            encoding="utf-8")
    names = [p.name.replace("@.", "@verify.") for p in sorted(tmp_path.iterdir())]
    done = subprocess.run([analyze, "verify", "--man=no", *names], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout + done.stderr) == (0, "")
