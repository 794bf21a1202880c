"""The doctor's line for a broker certificate it refuses, from real TLS handshakes with a
local listener (a real broker cannot be given an expired or misnamed certificate on
demand): expired, for another host, signed by another CA; each one line naming what to
do."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.security import KafkaSecurity
from sandbox.pki import Authority, Issued
from selfheal.doctor_checks import FAIL, kafka_reach


def _listener(issued: Issued) -> Iterator[int]:
    """A TLS listener presenting ``issued``; its port."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(issued.cert, issued.key)
    sock = socket.create_server(("127.0.0.1", 0))

    def accept() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            try:
                context.wrap_socket(conn, server_side=True).close()
            except (OSError, ssl.SSLError):
                conn.close()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


@pytest.fixture(scope="module")
def ca(tmp_path_factory) -> Authority:
    return Authority(tmp_path_factory.mktemp("ca"))


def _reach(ca: Authority, issued: Issued):
    for port in _listener(issued):
        check, meta = kafka_reach("cluster", f"localhost:{port}",
                                  KafkaSecurity(protocol="SSL", ssl_ca_file=ca.cert),
                                  "[cluster.security]", 3.0)
        assert meta is None and check.status == FAIL
        return check
    raise AssertionError("no listener")


def test_an_expired_broker_certificate(ca):
    check = _reach(ca, ca.issue("old", server=True, hosts=("localhost",), expired=True))
    assert "the broker's certificate has expired" in check.detail
    assert check.fix == "renew the brokers' certificates"


def test_a_certificate_for_another_host(ca):
    check = _reach(ca, ca.issue("elsewhere", server=True, hosts=("kafka-9.example.com",)))
    assert "the broker's certificate does not name localhost" in check.detail
    assert "subject alternative names" in check.fix


def test_a_ca_that_does_not_sign_the_broker(ca, tmp_path: Path):
    other = Authority(tmp_path / "other", "another CA")
    check = _reach(ca, other.issue("foreign", server=True, hosts=("localhost",)))
    assert "[cluster.security] ssl_ca_file does not sign the broker's certificate" in \
        check.detail
    assert check.fix.startswith("set [cluster.security] ssl_ca_file to the CA")
