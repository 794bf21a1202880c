"""No password, key, token or JAAS line in --help, config errors or a config dump."""

from __future__ import annotations

import argparse

import pytest

from core.config import ConfigError, load
from core.security import confluent_settings, spark_options
from selfheal.cli import build_parser

SIGNING_KEY = "SIGNINGKEYVALUE-short"  # under 32 characters: refused
KAFKA_PASSWORD = "Kafka-Pa55-word"
SECRETS = (SIGNING_KEY, KAFKA_PASSWORD, "LINKSECRETVALUE", "APITOKENVALUE", "ROUTINGKEYVALUE")


@pytest.fixture
def secret_env(monkeypatch, tmp_path):
    pw = tmp_path / "kafka.password"
    pw.write_text(KAFKA_PASSWORD)
    pw.chmod(0o600)
    env = {"SELFHEAL_CLUSTER_BOOTSTRAP_SERVERS": "k1:9093",
           "SELFHEAL_CLUSTER_SECURITY_PROTOCOL": "SASL_SSL",
           "SELFHEAL_CLUSTER_SECURITY_SASL_MECHANISM": "SCRAM-SHA-512",
           "SELFHEAL_CLUSTER_SECURITY_USERNAME": "selfheal",
           "SELFHEAL_CLUSTER_SECURITY_PASSWORD_FILE": str(pw),
           "SELFHEAL_SERVE_LINK_SECRET": "LINKSECRETVALUE",
           "SELFHEAL_SERVE_API_TOKEN": "APITOKENVALUE",
           "SELFHEAL_PAGER_PAGERDUTY_ROUTING_KEY": "ROUTINGKEYVALUE",
           "KAFKA_PASSWORD": KAFKA_PASSWORD}
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    return env


def _helps(parser: argparse.ArgumentParser) -> list[str]:
    texts = [parser.format_help()]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                texts.extend(_helps(sub))
    return texts


def test_no_help_text_shows_a_secret(secret_env):
    texts = _helps(build_parser())
    assert len(texts) > 10  # every command and sub-command
    for text in texts:
        assert not [s for s in SECRETS if s in text]


@pytest.mark.parametrize("var, value", [
    ("SELFHEAL_CLUSTER_ACTION_SIGNING_KEY", SIGNING_KEY),
    ("SELFHEAL_PAGER_SLACK_WEBHOOK_URL", "hooks.slack.com/services/SLACKSECRETPATH"),
])
def test_a_refused_secret_is_not_echoed(var, value):
    with pytest.raises(ConfigError) as err:
        load(env={var: value}, use_fallbacks=False)
    assert value not in str(err.value)
    assert var in str(err.value)  # still says which one


def test_a_config_dump_shows_no_secret(secret_env):
    config = load()
    settings = [confluent_settings(config.cluster_security), spark_options(config.bus_security)]
    dump = repr(config) + repr(settings) + str(settings)
    assert "SCRAM-SHA-512" in dump and "kafka.password" in dump  # the shape is there
    assert not [s for s in SECRETS if s in dump]
