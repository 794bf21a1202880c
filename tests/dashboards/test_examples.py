"""The shipped Prometheus and Alertmanager examples, checked by Debian's real promtool and
amtool, and held to the processes the deploy units run and the labels the rules use."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import yaml

from sandbox import alertmanager
from tests.unit.test_deploy_units import SERVICES, parse_unit

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = ROOT / "dashboards"
PROMETHEUS_EXAMPLE = DASHBOARDS / "prometheus.example.yml"
ALERTMANAGER_EXAMPLE = DASHBOARDS / "alertmanager.example.yml"


def _run(tool: str, package: str, *args: str | Path) -> subprocess.CompletedProcess[str]:
    binary = shutil.which(tool)
    assert binary, f"{tool} is missing: `make deps` installs Debian's {package} package"
    return subprocess.run([binary, *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def _selfheal_targets() -> list[dict]:
    doc = yaml.safe_load(PROMETHEUS_EXAMPLE.read_text())
    (job,) = [j for j in doc["scrape_configs"] if j["job_name"] == "selfheal"]
    return job["static_configs"]


def test_promtool_accepts_the_prometheus_example_and_its_rules():
    done = _run("promtool", "prometheus", "check", "config", PROMETHEUS_EXAMPLE)
    assert done.returncode == 0, done.stdout + done.stderr
    # The rules are found beside the example, not merely allowed to be missing.
    assert f"{len(list((DASHBOARDS / 'rules').glob('*.yml')))} rule files found" in done.stdout


def test_the_prometheus_example_scrapes_every_process_the_units_run():
    processes = {"-".join(shlex.split(parse_unit(p)["Service"]["ExecStart"][0])[3:])
                 for p in SERVICES}
    targets = _selfheal_targets()
    assert {t["labels"]["process"] for t in targets} == processes
    assert all(t["labels"].get("cluster") for t in targets)


def test_every_process_label_the_rules_name_is_scraped_by_the_example():
    named = set()
    for rules in (DASHBOARDS / "rules").glob("*.yml"):
        named |= set(re.findall(r'process="([^"]+)"', rules.read_text()))
    assert named
    assert named <= {t["labels"]["process"] for t in _selfheal_targets()}


def test_the_prometheus_example_labels_each_exporter_with_its_cluster_and_broker():
    doc = yaml.safe_load(PROMETHEUS_EXAMPLE.read_text())
    (job,) = [j for j in doc["scrape_configs"] if j["job_name"] == "kafka"]
    assert job["static_configs"]
    for target in job["static_configs"]:
        assert {"cluster", "broker", "rack"} <= set(target["labels"])


def test_amtool_accepts_the_alertmanager_example():
    done = _run("amtool", "prometheus-alertmanager", "check-config", ALERTMANAGER_EXAMPLE)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_alertmanager_example_pages_serves_webhook_with_the_token_from_a_file():
    doc = yaml.safe_load(ALERTMANAGER_EXAMPLE.read_text())
    (receiver,) = doc["receivers"]
    assert doc["route"]["receiver"] == receiver["name"]
    (webhook,) = receiver["webhook_configs"]
    assert webhook["url"].endswith("/alertmanager")
    assert webhook["send_resolved"] is True
    assert set(webhook["http_config"]["basic_auth"]) == {"username", "password_file"}


def test_the_sandbox_renders_its_config_from_the_example(tmp_path):
    token_file = tmp_path / "token"
    doc = alertmanager.render("http://selfheal:s3cr%40t@127.0.0.1:8787/alertmanager",
                              token_file)
    example = yaml.safe_load(ALERTMANAGER_EXAMPLE.read_text())
    assert doc["route"]["group_by"] == example["route"]["group_by"]
    (webhook,) = doc["receivers"][0]["webhook_configs"]
    assert webhook["url"] == "http://127.0.0.1:8787/alertmanager"
    assert webhook["http_config"]["basic_auth"] == {"username": "selfheal",
                                                    "password_file": str(token_file)}
    assert token_file.read_text() == "s3cr@t"
    assert token_file.stat().st_mode & 0o077 == 0
    config = tmp_path / "alertmanager.yml"
    config.write_text(yaml.safe_dump(doc))
    assert "s3cr" not in config.read_text()
    done = _run("amtool", "prometheus-alertmanager", "check-config", config)
    assert done.returncode == 0, done.stdout + done.stderr
