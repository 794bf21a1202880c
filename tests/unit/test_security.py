"""core.security: the config sections, secrets from files and variables, and what each
client kind gets from one section."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from core.config import ConfigError, load
from core.security import (
    ExporterSecurity,
    KafkaSecurity,
    SecurityError,
    ZooKeeperSecurity,
    confluent_settings,
    exporter_settings,
    kafka_python_settings,
    kazoo_settings,
    spark_options,
)

PASSWORD = "s3cret-pa55"  # a value no test output may show


@pytest.fixture
def password_file(tmp_path: Path) -> Path:
    path = tmp_path / "kafka.password"
    path.write_text(PASSWORD + "\n")
    path.chmod(0o600)
    return path


@pytest.fixture
def pems(tmp_path: Path) -> dict[str, Path]:
    files = {name: tmp_path / f"{name}.pem" for name in ("ca", "cert", "key")}
    for name, path in files.items():
        path.write_text(f"-----BEGIN {'PRIVATE KEY' if name == 'key' else 'CERTIFICATE'}-----\n")
    return files


def scram(password_file: Path, **more: object) -> KafkaSecurity:
    return KafkaSecurity(protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                         username="selfheal-collect", password_file=password_file, **more)


# --- config --------------------------------------------------------------------------------
def test_the_sections_load_from_the_file_and_the_environment(tmp_path, password_file):
    path = tmp_path / "selfheal.toml"
    path.write_text(f'''
[cluster]
bootstrap_servers = "k1:9093"
[cluster.security]
protocol = "SASL_SSL"
sasl_mechanism = "SCRAM-SHA-512"
username = "selfheal"
password_file = "{password_file.name}"
[cluster.zookeeper_security]
use_ssl = true
''')
    config = load(path, {"SELFHEAL_CLUSTER_SECURITY_SSL_CHECK_HOSTNAME": "false"},
                  use_fallbacks=False)
    assert config.cluster_security.protocol == "SASL_SSL"
    assert config.cluster_security.password_file == password_file  # next to the file
    assert config.cluster_security.ssl_check_hostname is False
    assert config.cluster_zookeeper_security.use_ssl is True
    assert config.cluster_zookeeper_security.ssl_check_hostname is True  # on unless said


def test_the_bus_inherits_the_clusters_security_only_while_it_is_the_cluster():
    env = {"SELFHEAL_CLUSTER_BOOTSTRAP_SERVERS": "k1:9093",
           "SELFHEAL_CLUSTER_SECURITY_PROTOCOL": "SSL"}
    assert load(env=env, use_fallbacks=False).bus_security.protocol == "SSL"
    own = {**env, "SELFHEAL_BUS_BOOTSTRAP_SERVERS": "bus:9092"}
    assert load(env=own, use_fallbacks=False).bus_security.protocol == "PLAINTEXT"
    both = {**own, "SELFHEAL_BUS_SECURITY_PROTOCOL": "SASL_SSL"}
    assert load(env=both, use_fallbacks=False).bus_security.protocol == "SASL_SSL"


@pytest.mark.parametrize("var, value, says", [
    ("SELFHEAL_CLUSTER_SECURITY_PROTOCOL", "TLS", "must be one of PLAINTEXT"),
    ("SELFHEAL_CLUSTER_SECURITY_SASL_MECHANISM", "SCRAM", "must be one of PLAIN"),
    ("SELFHEAL_CLUSTER_SECURITY_SSL_CHECK_HOSTNAME", "maybe", "expected true or false"),
    ("SELFHEAL_CLUSTER_SECURITY_PASSWORD", "x", "unknown key cluster.security.password"),
])
def test_a_bad_value_is_one_line_naming_the_key(var, value, says):
    with pytest.raises(ConfigError, match=says) as err:
        load(env={var: value}, use_fallbacks=False)
    assert "\n" not in str(err.value)


# --- secrets ------------------------------------------------------------------------------
def test_a_missing_password_file_is_one_line_naming_it(tmp_path):
    missing = tmp_path / "nope.password"
    with pytest.raises(SecurityError, match=f"cannot read the password file {missing}"):
        confluent_settings(scram(missing))


def test_a_world_readable_password_file_warns_and_still_works(password_file, caplog):
    password_file.chmod(0o644)
    with caplog.at_level(logging.WARNING, "selfheal.security"):
        settings = confluent_settings(scram(password_file))
    assert settings["sasl.password"] == PASSWORD
    assert "readable by every user; chmod 600" in caplog.text
    assert PASSWORD not in caplog.text


def test_the_password_comes_from_the_variable(monkeypatch):
    monkeypatch.setenv("KAFKA_PW", PASSWORD)
    sec = KafkaSecurity(protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", username="u",
                        password_env="KAFKA_PW")
    assert kafka_python_settings(sec)["sasl_plain_password"] == PASSWORD
    monkeypatch.delenv("KAFKA_PW")
    with pytest.raises(SecurityError, match="KAFKA_PW is not set"):
        kafka_python_settings(sec)


@pytest.mark.parametrize("sec, says", [
    (KafkaSecurity(protocol="SASL_SSL"), "needs sasl_mechanism"),
    (KafkaSecurity(protocol="SASL_SSL", sasl_mechanism="PLAIN"), "needs username"),
    (KafkaSecurity(protocol="SASL_SSL", sasl_mechanism="PLAIN", username="u"),
     "needs a password"),
    (KafkaSecurity(protocol="SSL", ssl_cert_file=Path("/etc/hostname")), "both ssl_cert_file"),
    (KafkaSecurity(protocol="SSL", ssl_ca_file=Path("/no/ca.pem")), "does not exist"),
])
def test_an_incomplete_section_is_one_line(sec, says):
    for translate in (confluent_settings, kafka_python_settings, spark_options):
        with pytest.raises(SecurityError, match=says):
            translate(sec)


def test_no_secret_shows_in_any_repr(password_file, pems):
    sec = scram(password_file, ssl_ca_file=pems["ca"], ssl_cert_file=pems["cert"],
                ssl_key_file=pems["key"], ssl_key_password_file=password_file)
    for settings in (confluent_settings(sec), kafka_python_settings(sec), spark_options(sec)):
        assert PASSWORD not in repr(settings)
        assert PASSWORD not in f"{settings}"
    assert PASSWORD not in repr(sec)
    assert "selfheal-collect" in repr(sec)  # what is not secret stays readable
    assert "PRIVATE KEY" not in repr(spark_options(sec))  # the key's PEM neither


# --- one function per client kind -------------------------------------------------------
def test_confluent_gets_librdkafka_keys(password_file, pems):
    settings = confluent_settings(scram(password_file, ssl_ca_file=pems["ca"]))
    assert settings == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "selfheal-collect", "sasl.password": PASSWORD,
        "ssl.ca.location": str(pems["ca"]), "ssl.endpoint.identification.algorithm": "https",
    }


def test_confluent_really_takes_them(password_file, pems):
    from confluent_kafka.admin import AdminClient

    # librdkafka checks every key and value when the client is made (no broker needed).
    AdminClient({"bootstrap.servers": "127.0.0.1:1",
                 **confluent_settings(scram(password_file, ssl_ca_file=None))})


def test_oidc_for_librdkafka(password_file):
    sec = KafkaSecurity(protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER", username="client",
                        password_file=password_file, oauth_token_url="https://idp/token",
                        oauth_scope="kafka")
    settings = confluent_settings(sec)
    assert settings["sasl.oauthbearer.method"] == "oidc"
    assert settings["sasl.oauthbearer.client.secret"] == PASSWORD
    assert settings["sasl.oauthbearer.token.endpoint.url"] == "https://idp/token"
    assert "needs oauth_token_url" in _error(confluent_settings, KafkaSecurity(
        protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER", username="c",
        password_file=password_file))


def test_gssapi_is_refused_where_the_client_has_none():
    sec = KafkaSecurity(protocol="SASL_SSL", sasl_mechanism="GSSAPI", username="selfheal@R")
    assert "GSSAPI is not in the confluent-kafka wheels" in _error(confluent_settings, sec)
    assert kafka_python_settings(sec)["sasl_kerberos_service_name"] == "kafka"


def test_kafka_python_gets_its_keywords(password_file, pems):
    from kafka import KafkaAdminClient

    sec = scram(password_file, ssl_ca_file=pems["ca"], ssl_check_hostname=False)
    settings = kafka_python_settings(sec)
    assert settings == {
        "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "selfheal-collect", "sasl_plain_password": PASSWORD,
        "ssl_cafile": str(pems["ca"]), "ssl_check_hostname": False,
    }
    assert set(settings) <= set(KafkaAdminClient.DEFAULT_CONFIG)


def test_spark_gets_prefixed_keys_and_a_jaas_line(password_file, pems):
    options = spark_options(scram(password_file, ssl_ca_file=pems["ca"]))
    assert options["kafka.security.protocol"] == "SASL_SSL"
    assert options["kafka.ssl.truststore.type"] == "PEM"
    assert options["kafka.ssl.truststore.location"] == str(pems["ca"])
    assert options["kafka.sasl.jaas.config"] == (
        'org.apache.kafka.common.security.scram.ScramLoginModule required '
        f'username="selfheal-collect" password="{PASSWORD}";')
    assert all(key.startswith("kafka.") for key in options)


def test_a_quote_in_a_password_cannot_break_the_jaas_line(tmp_path):
    path = tmp_path / "pw"
    path.write_text('a"b\\c')
    path.chmod(0o600)
    jaas = spark_options(scram(path))["kafka.sasl.jaas.config"]
    assert jaas.endswith('password="a\\"b\\\\c";')


def test_plaintext_adds_nothing_but_the_protocol():
    assert confluent_settings(KafkaSecurity()) == {"security.protocol": "PLAINTEXT"}
    assert kafka_python_settings(KafkaSecurity()) == {"security_protocol": "PLAINTEXT"}
    assert spark_options(KafkaSecurity()) == {"kafka.security.protocol": "PLAINTEXT"}
    assert kazoo_settings(ZooKeeperSecurity()) == {}


def test_kazoo_gets_sasl_and_tls_with_the_hostname_checked(password_file, pems):
    from kazoo.client import KazooClient

    sec = ZooKeeperSecurity(sasl_mechanism="DIGEST-MD5", username="selfheal",
                            password_file=password_file, use_ssl=True, ssl_ca_file=pems["ca"])
    settings = kazoo_settings(sec)
    assert settings["sasl_options"] == {"mechanism": "DIGEST-MD5", "username": "selfheal",
                                        "password": PASSWORD}
    assert settings["check_hostname"] is True and settings["verify_certs"] is True
    assert settings["ca"] == str(pems["ca"])
    KazooClient(hosts="127.0.0.1:1", **settings).close()  # kazoo takes every keyword
    assert "DIGEST-MD5 needs username" in _error(
        kazoo_settings, ZooKeeperSecurity(sasl_mechanism="DIGEST-MD5"))


def test_exporter_basic_auth_header(password_file):
    import base64

    auth = exporter_settings(ExporterSecurity(username="prom", password_file=password_file))
    assert auth.authorization == "Basic " + base64.b64encode(
        f"prom:{PASSWORD}".encode()).decode()
    assert auth.context is None  # plain http(s) with the system's CAs
    assert PASSWORD not in repr(auth) and auth.authorization not in repr(auth)


def _error(translate, sec) -> str:
    with pytest.raises(SecurityError) as err:
        translate(sec)
    return str(err.value)
