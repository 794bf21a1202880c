"""A local certificate authority for the secured sandbox: a CA, a broker certificate for
127.0.0.1 and localhost, and one client certificate per principal (mutual TLS), all PEM
(Kafka reads PEM key and trust stores since 2.7, KIP-651; librdkafka and kafka-python read
nothing else). Made with the `cryptography` package; keys are unencrypted files of mode
0600 in the sandbox's own folder (Kafka accepts unencrypted PEM keys since 3.2,
KAFKA-12703)."""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import os
from pathlib import Path

VALID_DAYS = 30


@dataclasses.dataclass(frozen=True)
class Issued:
    """One certificate: its key and certificate files, and both in one for Kafka's PEM
    keystore (key first, then the chain)."""

    key: Path
    cert: Path
    keystore: Path


def _write_private(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    return path


def _name(common_name: str):  # type: ignore[no-untyped-def]
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kafka-selfheal sandbox"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


class Authority:
    """A CA whose key stays in ``folder``; it signs the broker's and the clients' certs."""

    def __init__(self, folder: Path, name: str = "selfheal-sandbox-ca",
                 now: datetime.datetime | None = None) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec

        self.folder = folder
        self.now = now or datetime.datetime.now(datetime.UTC)
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = _name(name)
        self._cert = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(self.now - datetime.timedelta(minutes=5))
            .not_valid_after(self.now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(self._key, hashes.SHA256()))
        self.cert = folder / "ca.pem"
        folder.mkdir(parents=True, exist_ok=True)
        self.cert.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, server: bool, valid_days: float = VALID_DAYS,
              hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
              expired: bool = False) -> Issued:
        """A certificate for ``name`` (the CN, which is the principal with mutual TLS);
        a server certificate names ``hosts`` in its subject alternative names. An
        ``expired`` one ended a day ago (for the tests of a client's refusal)."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID

        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder().subject_name(_name(name))
            .issuer_name(self._cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self.now - datetime.timedelta(days=10 if expired else 0,
                                                            minutes=5))
            .not_valid_after(self.now + datetime.timedelta(days=-1 if expired else valid_days))
            .add_extension(x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                if server else [ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
        if server:
            names: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    names.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        key_pem = key.private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        return Issued(
            key=_write_private(self.folder / f"{name}.key", key_pem),
            cert=_write_private(self.folder / f"{name}.pem", cert_pem),
            keystore=_write_private(self.folder / f"{name}.keystore.pem", key_pem + cert_pem))
