"""How every connection the product makes is secured: the config sections, and ONE
function per client kind that turns a section into that client's settings.

No client is configured by hand anywhere else (tests/unit/test_security_factories.py
holds every factory to these functions). Secrets live only in files or environment
variables; what the functions return carries them as `Secret`, whose repr is
redacted, so a settings dict that reaches a log line or an exception shows ``***``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import ssl
import stat
from pathlib import Path
from typing import Any

from core.config_values import ConfigError, one_of, optional, url
from core.config_values import field as _field

log = logging.getLogger("selfheal.security")

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")


class SecurityError(ConfigError):
    """A security setting that cannot be used; one line saying what to fix."""


class Secret(str):
    """A password, token or JAAS line: the client gets the value; the repr of a settings
    dict holding it (a log line, an exception) shows ``***``. Its str stays the value:
    confluent-kafka reads every setting through str()."""

    def __repr__(self) -> str:
        return "'***'"

    def reveal(self) -> str:
        """The value itself, for the one call that must send it (basic auth)."""
        return str.__str__(self)


def _redacted(obj: Any) -> str:
    """A dataclass repr: paths and names shown, no secret value (none is stored)."""
    shown = ", ".join(f"{f.name}={getattr(obj, f.name)!r}" for f in dataclasses.fields(obj)
                      if getattr(obj, f.name) not in (None, f.default))
    return f"{type(obj).__name__}({shown})"


@dataclasses.dataclass(frozen=True, slots=True, repr=False)
class KafkaSecurity:
    """[cluster.security] and [bus.security] (the bus takes the cluster's while it is the
    cluster). Unset: PLAINTEXT, no authentication."""

    protocol: str = _field("PLAINTEXT", one_of(*PROTOCOLS),
                           doc="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.")
    sasl_mechanism: str | None = _field(
        None, optional(one_of(*MECHANISMS)), example='"SCRAM-SHA-512"',
        doc="PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (OIDC client credentials) or "
            "GSSAPI; with a SASL_* protocol.")
    username: str | None = _field(
        None, doc="SASL user; OAUTHBEARER: the OIDC client id; GSSAPI: the Kerberos principal.")
    password_file: Path | None = _field(
        None, doc="The password (OAUTHBEARER: the client secret) from this file, read at "
                  "start; mode 600.")
    password_env: str | None = _field(
        None, doc="...else from this environment variable (its name, not the password).")
    oauth_token_url: str | None = _field(None, optional(url),
                                         doc="OAUTHBEARER: the OIDC token endpoint.")
    oauth_scope: str | None = _field(None, doc="OAUTHBEARER: the scope asked for, if any.")
    kerberos_service_name: str = _field("kafka", doc="GSSAPI: the brokers' service name.")
    kerberos_keytab: Path | None = _field(None, doc="GSSAPI: the keytab.")
    ssl_ca_file: Path | None = _field(
        None, doc="PEM CA that signed the brokers' certificates; unset: the system's CAs.")
    ssl_cert_file: Path | None = _field(None, doc="PEM client certificate (mutual TLS).")
    ssl_key_file: Path | None = _field(None, doc="PEM key of that certificate.")
    ssl_key_password_file: Path | None = _field(None, doc="The key's password, from a file.")
    ssl_key_password_env: str | None = _field(None, doc="...else from this variable.")
    ssl_check_hostname: bool = _field(
        True, doc="The broker's certificate must name the host dialled.")

    __repr__ = _redacted

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")


@dataclasses.dataclass(frozen=True, slots=True, repr=False)
class ZooKeeperSecurity:
    """[cluster.zookeeper_security]: kazoo for the ZooKeeper collector and serve's lock."""

    sasl_mechanism: str | None = _field(None, optional(one_of("DIGEST-MD5", "GSSAPI")),
                                        doc="DIGEST-MD5 or GSSAPI; unset: no SASL.")
    username: str | None = _field(None, doc="The ZooKeeper SASL user.")
    password_file: Path | None = _field(None, doc="Its password, from this file (mode 600).")
    password_env: str | None = _field(None, doc="...else from this variable.")
    use_ssl: bool = _field(False, doc="TLS to ZooKeeper (its secureClientPort).")
    ssl_ca_file: Path | None = _field(None, doc="PEM CA that signed ZooKeeper's certificate.")
    ssl_cert_file: Path | None = _field(None, doc="PEM client certificate, if asked for.")
    ssl_key_file: Path | None = _field(None, doc="PEM key of that certificate.")
    ssl_key_password_file: Path | None = _field(None, doc="The key's password, from a file.")
    ssl_key_password_env: str | None = _field(None, doc="...else from this variable.")
    ssl_check_hostname: bool = _field(
        True, doc="ZooKeeper's certificate must name its host (kazoo's own default is off).")

    __repr__ = _redacted


@dataclasses.dataclass(frozen=True, slots=True, repr=False)
class ExporterSecurity:
    """[cluster.exporter_security]: the JMX exporter scrapes (HTTPS, basic auth, mTLS)."""

    username: str | None = _field(None, doc="Basic auth user; unset: none.")
    password_file: Path | None = _field(None, doc="Its password, from this file (mode 600).")
    password_env: str | None = _field(None, doc="...else from this variable.")
    ssl_ca_file: Path | None = _field(None, doc="PEM CA for https:// exporter URLs.")
    ssl_cert_file: Path | None = _field(None, doc="PEM client certificate (mutual TLS).")
    ssl_key_file: Path | None = _field(None, doc="PEM key of that certificate.")
    ssl_key_password_file: Path | None = _field(None, doc="The key's password, from a file.")
    ssl_key_password_env: str | None = _field(None, doc="...else from this variable.")
    ssl_check_hostname: bool = _field(True, doc="The exporter's certificate must name its host.")

    __repr__ = _redacted


# --- secrets ----------------------------------------------------------------------------
_warned: set[Path] = set()


def read_secret(file: Path | None, env: str | None, what: str) -> Secret | None:
    """The secret from ``file`` (a missing one is an error; a world-readable one a
    warning), else from the variable ``env`` (unset: an error); neither named: None."""
    if file is not None:
        try:
            mode = file.stat().st_mode
            text = file.read_text().strip()
        except OSError as exc:
            raise SecurityError(f"{what}: cannot read the password file {file} "
                                f"({exc.strerror}); create it or fix the path") from None
        if mode & stat.S_IROTH and file not in _warned:
            _warned.add(file)
            log.warning("%s: the password file %s is readable by every user; "
                        "chmod 600 it", what, file)
        if not text:
            raise SecurityError(f"{what}: the password file {file} is empty")
        return Secret(text)
    if env is not None:
        value = os.environ.get(env)
        if not value:
            raise SecurityError(f"{what}: the environment variable {env} is not set; "
                                "export it or name a password_file instead")
        return Secret(value)
    return None


def _password(sec: KafkaSecurity | ZooKeeperSecurity | ExporterSecurity, what: str
              ) -> Secret | None:
    return read_secret(sec.password_file, sec.password_env, what)


def _key_password(sec: KafkaSecurity | ZooKeeperSecurity | ExporterSecurity, what: str
                  ) -> Secret | None:
    return read_secret(sec.ssl_key_password_file, sec.ssl_key_password_env,
                       f"{what} ssl_key_password")


def _check_files(sec: KafkaSecurity | ZooKeeperSecurity | ExporterSecurity, what: str) -> None:
    for name in ("ssl_ca_file", "ssl_cert_file", "ssl_key_file"):
        path = getattr(sec, name)
        if path is not None and not Path(path).is_file():
            raise SecurityError(f"{what}.{name}: {path} does not exist or is not a file")
    if (sec.ssl_cert_file is None) != (sec.ssl_key_file is None):
        raise SecurityError(f"{what}: set both ssl_cert_file and ssl_key_file, or neither")


def _credentials(sec: KafkaSecurity, what: str) -> tuple[str, Secret | None]:
    """The SASL user and password a mechanism needs, or one line saying what is missing."""
    if sec.sasl_mechanism is None:
        raise SecurityError(f"{what}: protocol {sec.protocol} needs sasl_mechanism "
                            f"({', '.join(MECHANISMS)})")
    if not sec.username:
        raise SecurityError(f"{what}: sasl_mechanism {sec.sasl_mechanism} needs username")
    password = _password(sec, what)
    if sec.sasl_mechanism == "GSSAPI":
        return sec.username, None
    if password is None:
        raise SecurityError(f"{what}: sasl_mechanism {sec.sasl_mechanism} needs a password: "
                            "set password_file or password_env")
    if sec.sasl_mechanism == "OAUTHBEARER" and not sec.oauth_token_url:
        raise SecurityError(f"{what}: OAUTHBEARER needs oauth_token_url (the OIDC token "
                            "endpoint); username and password are the client id and secret")
    return sec.username, password


def _tls_files(sec: KafkaSecurity | ZooKeeperSecurity, what: str, ca: str, cert: str,
               key: str, key_password: str) -> dict[str, Any]:
    """The CA, certificate, key and key password under one client's names for them."""
    out: dict[str, Any] = {name: str(path) for name, path in (
        (ca, sec.ssl_ca_file), (cert, sec.ssl_cert_file), (key, sec.ssl_key_file))
        if path is not None}
    password = _key_password(sec, what)
    if password is not None:
        out[key_password] = password
    return out


# --- one translating function per client kind --------------------------------------------
def confluent_settings(sec: KafkaSecurity, what: str = "[cluster.security]") -> dict[str, Any]:
    """librdkafka keys (confluent-kafka Producer, Consumer, AdminClient)."""
    _check_files(sec, what)
    out: dict[str, Any] = {"security.protocol": sec.protocol}
    if sec.tls:
        out["ssl.endpoint.identification.algorithm"] = "https" if sec.ssl_check_hostname \
            else "none"
        out.update(_tls_files(sec, what, "ssl.ca.location", "ssl.certificate.location",
                              "ssl.key.location", "ssl.key.password"))
    if sec.sasl:
        user, password = _credentials(sec, what)
        out["sasl.mechanism"] = sec.sasl_mechanism
        if sec.sasl_mechanism == "GSSAPI":
            raise SecurityError(f"{what}: GSSAPI is not in the confluent-kafka wheels this "
                                "product uses; use SCRAM or OAUTHBEARER")
        if sec.sasl_mechanism == "OAUTHBEARER":
            out.update({"sasl.oauthbearer.method": "oidc",
                        "sasl.oauthbearer.client.id": user,
                        "sasl.oauthbearer.client.secret": password,
                        "sasl.oauthbearer.token.endpoint.url": sec.oauth_token_url})
            if sec.oauth_scope:
                out["sasl.oauthbearer.scope"] = sec.oauth_scope
        else:
            out.update({"sasl.username": user, "sasl.password": password})
    return out


def kafka_python_settings(sec: KafkaSecurity, what: str = "[cluster.security]"
                          ) -> dict[str, Any]:
    """kafka-python keyword arguments (the KafkaAdminClient of core/live.py)."""
    _check_files(sec, what)
    out: dict[str, Any] = {"security_protocol": sec.protocol}
    if sec.tls:
        out["ssl_check_hostname"] = sec.ssl_check_hostname
        out.update(_tls_files(sec, what, "ssl_cafile", "ssl_certfile", "ssl_keyfile",
                              "ssl_password"))
    if sec.sasl:
        user, password = _credentials(sec, what)
        out["sasl_mechanism"] = sec.sasl_mechanism
        if sec.sasl_mechanism == "GSSAPI":
            out["sasl_kerberos_service_name"] = sec.kerberos_service_name
        elif sec.sasl_mechanism == "OAUTHBEARER":
            assert password is not None and sec.oauth_token_url is not None
            from kafka.net.sasl.oauth import AbstractTokenProvider

            class _Provider(OidcTokenProvider, AbstractTokenProvider):  # kafka-python checks
                pass

            out["sasl_oauth_token_provider"] = _Provider(
                sec.oauth_token_url, user, password, sec.oauth_scope)
        else:
            out.update({"sasl_plain_username": user, "sasl_plain_password": password})
    return out


_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
    "GSSAPI": "com.sun.security.auth.module.Krb5LoginModule",
}


def _jaas_quote(value: str) -> str:
    return '"' + str.__str__(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def spark_options(sec: KafkaSecurity, what: str = "[bus.security]") -> dict[str, Any]:
    """Spark's Kafka source and sink options: the Java client keys, ``kafka.``-prefixed,
    with the JAAS line (a `Secret`)."""
    _check_files(sec, what)
    out: dict[str, Any] = {"kafka.security.protocol": sec.protocol}
    if sec.tls:
        out["kafka.ssl.endpoint.identification.algorithm"] = "https" \
            if sec.ssl_check_hostname else ""
        if sec.ssl_ca_file is not None:  # PEM stores for the Java client (KIP-651)
            out["kafka.ssl.truststore.type"] = "PEM"
            out["kafka.ssl.truststore.location"] = str(sec.ssl_ca_file)
        if sec.ssl_cert_file is not None and sec.ssl_key_file is not None:
            out["kafka.ssl.keystore.type"] = "PEM"
            out["kafka.ssl.keystore.certificate.chain"] = Path(sec.ssl_cert_file).read_text()
            out["kafka.ssl.keystore.key"] = Secret(Path(sec.ssl_key_file).read_text())
            key_password = _key_password(sec, what)
            if key_password is not None:
                out["kafka.ssl.key.password"] = key_password
    if sec.sasl:
        user, password = _credentials(sec, what)
        mech = str(sec.sasl_mechanism)
        out["kafka.sasl.mechanism"] = mech
        if mech == "GSSAPI":
            out["kafka.sasl.kerberos.service.name"] = sec.kerberos_service_name
            keytab = f" useKeyTab=true keyTab={_jaas_quote(str(sec.kerberos_keytab))}" \
                if sec.kerberos_keytab else ""
            jaas = f"{_JAAS_MODULES[mech]} required{keytab} principal={_jaas_quote(user)};"
        elif mech == "OAUTHBEARER":
            assert password is not None
            out["kafka.sasl.oauthbearer.token.endpoint.url"] = sec.oauth_token_url
            out["kafka.sasl.login.callback.handler.class"] = (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler")
            scope = f" scope={_jaas_quote(sec.oauth_scope)}" if sec.oauth_scope else ""
            jaas = (f"{_JAAS_MODULES[mech]} required clientId={_jaas_quote(user)} "
                    f"clientSecret={_jaas_quote(password)}{scope};")
        else:
            assert password is not None
            jaas = (f"{_JAAS_MODULES[mech]} required username={_jaas_quote(user)} "
                    f"password={_jaas_quote(password)};")
        out["kafka.sasl.jaas.config"] = Secret(jaas)
    return out


def kazoo_settings(sec: ZooKeeperSecurity, what: str = "[cluster.zookeeper_security]"
                   ) -> dict[str, Any]:
    """KazooClient keyword arguments: SASL (DIGEST-MD5, GSSAPI) and TLS, hostname checked."""
    _check_files(sec, what)
    out: dict[str, Any] = {}
    if sec.sasl_mechanism is not None:
        options: dict[str, Any] = {"mechanism": sec.sasl_mechanism}
        if sec.sasl_mechanism == "DIGEST-MD5":
            password = _password(sec, what)
            if not sec.username or password is None:
                raise SecurityError(f"{what}: DIGEST-MD5 needs username and password_file "
                                    "or password_env")
            options.update({"username": sec.username, "password": password})
        elif sec.username:
            options["principal"] = sec.username
        out["sasl_options"] = options
    if sec.use_ssl:
        out.update({"use_ssl": True, "verify_certs": True,
                    "check_hostname": sec.ssl_check_hostname})
        out.update(_tls_files(sec, what, "ca", "certfile", "keyfile", "keyfile_password"))
    return out


@dataclasses.dataclass(frozen=True)
class HttpAuth:
    """What an exporter scrape needs: a TLS context for https:// and the Authorization
    header (a `Secret`), either None when not configured."""

    context: ssl.SSLContext | None
    authorization: Secret | None

    def __repr__(self) -> str:
        return f"HttpAuth(tls={self.context is not None}, basic={self.authorization is not None})"


def exporter_settings(sec: ExporterSecurity, what: str = "[cluster.exporter_security]"
                      ) -> HttpAuth:
    """The scrape's TLS context (CA, client certificate, hostname check) and basic auth."""
    import base64

    _check_files(sec, what)
    context = None
    if sec.ssl_ca_file or sec.ssl_cert_file or not sec.ssl_check_hostname:
        context = ssl.create_default_context(
            cafile=str(sec.ssl_ca_file) if sec.ssl_ca_file else None)
        context.check_hostname = sec.ssl_check_hostname
        if sec.ssl_cert_file and sec.ssl_key_file:
            key_password = _key_password(sec, what)
            context.load_cert_chain(str(sec.ssl_cert_file), str(sec.ssl_key_file),
                                    password=key_password.reveal() if key_password else None)
    authorization = None
    if sec.username:
        password = _password(sec, what)
        if password is None:
            raise SecurityError(f"{what}: username needs password_file or password_env")
        token = base64.b64encode(f"{sec.username}:{password.reveal()}".encode()).decode()
        authorization = Secret(f"Basic {token}")
    return HttpAuth(context, authorization)


class OidcTokenProvider:
    """kafka-python's OAUTHBEARER token provider: OIDC client credentials, the token kept
    until a minute before it expires."""

    def __init__(self, url: str, client_id: str, secret: Secret, scope: str | None) -> None:
        self.url, self.client_id, self._secret, self.scope = url, client_id, secret, scope
        self._token: Secret | None = None
        self._expires = 0.0

    def __repr__(self) -> str:
        return f"OidcTokenProvider({self.url!r}, {self.client_id!r})"

    def token(self) -> str:
        import json
        import time
        import urllib.parse
        import urllib.request

        if self._token is not None and time.monotonic() < self._expires:
            return self._token.reveal()
        form = {"grant_type": "client_credentials", "client_id": self.client_id,
                "client_secret": self._secret.reveal()}
        if self.scope:
            form["scope"] = self.scope
        request = urllib.request.Request(self.url, urllib.parse.urlencode(form).encode())
        try:
            with urllib.request.urlopen(request, timeout=10) as resp:
                body = json.loads(resp.read())
        except (OSError, ValueError) as exc:
            raise SecurityError(f"OIDC token endpoint {self.url} refused client "
                                f"{self.client_id}: {exc.__class__.__name__}") from None
        self._token = Secret(body["access_token"])
        self._expires = time.monotonic() + max(0.0, float(body.get("expires_in", 300)) - 60)
        return self._token.reveal()
