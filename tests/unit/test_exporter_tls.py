"""The exporter scrape over HTTPS: the CA, the hostname, basic auth and mutual TLS, each
with a real handshake against a local HTTPS server that answers like a jmx_exporter."""

from __future__ import annotations

import base64
import ssl
import threading
import urllib.error
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from core.security import ExporterSecurity, exporter_settings
from sandbox.pki import Authority, Issued
from streams.collect.broker_metrics import fetch

BODY = "# TYPE kafka_log_logmanager_offlinelogdirectorycount gauge\n" \
       "kafka_log_logmanager_offlinelogdirectorycount 0.0\n"
USER, PASSWORD = "prometheus", "exp0rter-pw"


class _Exporter(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        wanted = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        if self.headers.get("Authorization") != wanted:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="/"')
            self.end_headers()
            return
        self.send_response(200)
        self.end_headers()
        self.wfile.write(BODY.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def ca(tmp_path_factory) -> Authority:
    return Authority(tmp_path_factory.mktemp("ca"))


def _serve(server_pem: Issued, client_ca: Path | None = None) -> Iterator[str]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(server_pem.cert, server_pem.key)
    if client_ca is not None:  # mutual TLS
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(client_ca)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Exporter)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://localhost:{server.server_port}/metrics"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def exporter(ca) -> Iterator[str]:
    yield from _serve(ca.issue("exporter", server=True, hosts=("localhost",)))


@pytest.fixture
def pw(tmp_path) -> Path:
    path = tmp_path / "exporter.password"
    path.write_text(PASSWORD)
    path.chmod(0o600)
    return path


def test_https_with_the_ca_and_basic_auth_scrapes(exporter, ca, pw):
    auth = exporter_settings(ExporterSecurity(username=USER, password_file=pw,
                                              ssl_ca_file=ca.cert))
    assert fetch(exporter, 5, auth) == BODY


def test_without_the_password_the_exporter_says_401(exporter, ca):
    auth = exporter_settings(ExporterSecurity(ssl_ca_file=ca.cert))
    with pytest.raises(urllib.error.HTTPError) as err:
        fetch(exporter, 5, auth)
    assert err.value.code == 401


def test_a_ca_that_did_not_sign_the_exporter_is_refused(exporter, tmp_path, pw):
    other = Authority(tmp_path / "other", "another CA")
    auth = exporter_settings(ExporterSecurity(username=USER, password_file=pw,
                                              ssl_ca_file=other.cert))
    with pytest.raises(urllib.error.URLError) as err:
        fetch(exporter, 5, auth)
    assert isinstance(err.value.reason, ssl.SSLCertVerificationError)


def test_a_certificate_for_another_host_is_refused_unless_the_check_is_off(ca, pw):
    for url in _serve(ca.issue("elsewhere", server=True, hosts=("kafka-9.example.com",))):
        checked = exporter_settings(ExporterSecurity(username=USER, password_file=pw,
                                                     ssl_ca_file=ca.cert))
        with pytest.raises(urllib.error.URLError, match="match|mismatch"):
            fetch(url, 5, checked)
        unchecked = exporter_settings(ExporterSecurity(
            username=USER, password_file=pw, ssl_ca_file=ca.cert, ssl_check_hostname=False))
        assert fetch(url, 5, unchecked) == BODY


def test_mutual_tls_needs_the_client_certificate(ca, pw):
    client = ca.issue("selfheal-collect", server=False)
    server = ca.issue("mtls-exporter", server=True, hosts=("localhost",))
    for url in _serve(server, client_ca=ca.cert):
        without = exporter_settings(ExporterSecurity(username=USER, password_file=pw,
                                                     ssl_ca_file=ca.cert))
        with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
            fetch(url, 5, without)
        with_cert = exporter_settings(ExporterSecurity(
            username=USER, password_file=pw, ssl_ca_file=ca.cert,
            ssl_cert_file=client.cert, ssl_key_file=client.key))
        assert fetch(url, 5, with_cert) == BODY


def test_an_expired_certificate_is_refused(ca, pw):
    for url in _serve(ca.issue("expired", server=True, hosts=("localhost",), expired=True)):
        auth = exporter_settings(ExporterSecurity(username=USER, password_file=pw,
                                                  ssl_ca_file=ca.cert))
        with pytest.raises(urllib.error.URLError, match="expired"):
            fetch(url, 5, auth)
