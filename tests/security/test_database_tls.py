"""The functions verify the campaign database's certificate: a server on the path that presents
a certificate the RDS certificate authorities did not sign gets no password.

An impostor PostgreSQL server on 127.0.0.1 speaks TLS with a certificate of its own making and
asks for the password in clear. With ``sslmode=require`` (encryption, no verification) the
client hands it over; with the URL the functions build (``verify-full`` against the RDS
bundle) the handshake fails before anything is sent."""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import socket
import ssl
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from sqlalchemy import create_engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool

from traingrid.aws import secrets as db_secrets
from traingrid.aws.secrets import ca_bundle, url_from_secret
from traingrid_local.templates import load_template

ROOT = Path(__file__).resolve().parents[2]
LAYER_BUNDLE = ROOT / "layers" / "database" / "rds-ca" / "global-bundle.pem"
PASSWORD = "s3cret-of-the-owner"
NOW = datetime.datetime.now(datetime.UTC)


def _key_and_cert(name: str, issuer: tuple[ec.EllipticCurvePrivateKey, x509.Certificate] | None,
                  ca: bool) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    builder = (x509.CertificateBuilder().subject_name(subject)
               .issuer_name(issuer[1].subject if issuer else subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(NOW - datetime.timedelta(hours=1))
               .not_valid_after(NOW + datetime.timedelta(hours=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
    return key, builder.sign(issuer[0] if issuer else key, hashes.SHA256())


def _pem(tmp_path: Path, name: str, *parts: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(b"".join(parts))
    return path


class Impostor:
    """A PostgreSQL server that accepts TLS and asks for the password in clear."""

    def __init__(self, certfile: Path, keyfile: Path) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(certfile, keyfile)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.passwords: list[str] = []
        self.handshakes = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            with connection:
                connection.settimeout(5)
                with contextlib.suppress(OSError, ssl.SSLError, struct.error):
                    self._answer(connection)

    def _answer(self, connection: socket.socket) -> None:
        while True:  # GSSAPI encryption is declined, TLS accepted
            _, code = struct.unpack("!II", connection.recv(8))
            if code == 80877104:
                connection.sendall(b"N")
                continue
            assert code == 80877103, code
            connection.sendall(b"S")
            break
        tls = self.context.wrap_socket(connection, server_side=True)
        self.handshakes += 1
        (length,) = struct.unpack("!I", tls.recv(4))
        tls.recv(length - 4)  # the startup message
        tls.sendall(b"R" + struct.pack("!II", 8, 3))  # AuthenticationCleartextPassword
        kind, length = struct.unpack("!cI", tls.recv(5))
        if kind == b"p":
            self.passwords.append(tls.recv(length - 4).rstrip(b"\0").decode())

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def impostor(tmp_path: Path) -> Iterator[Impostor]:
    key, cert = _key_and_cert("127.0.0.1", None, ca=False)
    server = Impostor(
        _pem(tmp_path, "impostor.pem", cert.public_bytes(serialization.Encoding.PEM)),
        _pem(tmp_path, "impostor.key", key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption())))
    yield server
    server.close()


def _connect(url: str) -> None:
    engine = create_engine(url, poolclass=NullPool, connect_args={"connect_timeout": 5})
    try:
        with engine.connect():
            pass
    finally:
        engine.dispose()


def _secret(port: int) -> dict[str, str]:
    return {"username": "traingrid_app", "password": PASSWORD, "host": "127.0.0.1",
            "port": str(port), "dbname": "traingrid"}


def test_encryption_without_verification_hands_the_password_to_an_impostor(impostor):
    """The harness works: the mode the functions used before gives the password away."""
    with pytest.raises(OperationalError):
        _connect(f"postgresql+psycopg://traingrid_app:{PASSWORD}@127.0.0.1:{impostor.port}"
                 "/traingrid?sslmode=require")
    assert impostor.passwords == [PASSWORD]


def test_the_functions_refuse_a_server_the_rds_authorities_did_not_sign(impostor):
    url = url_from_secret(_secret(impostor.port))
    assert "sslmode=verify-full" in url and f"sslrootcert={LAYER_BUNDLE}" in url

    with pytest.raises(OperationalError, match="certificate verify failed"):
        _connect(url)
    assert impostor.passwords == []


def test_a_server_whose_certificate_chains_to_the_bundle_is_trusted(tmp_path, monkeypatch):
    """What verify-full trusts is the bundle: a chain to it (and the host's name) passes."""
    authority = _key_and_cert("Test Root CA", None, ca=True)
    key, cert = _key_and_cert("127.0.0.1", authority, ca=False)
    server = Impostor(
        _pem(tmp_path, "server.pem", cert.public_bytes(serialization.Encoding.PEM)),
        _pem(tmp_path, "server.key", key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption())))
    bundle = _pem(tmp_path, "bundle.pem", authority[1].public_bytes(serialization.Encoding.PEM))
    monkeypatch.setenv("DATABASE_CA_BUNDLE", str(bundle))
    try:
        with pytest.raises(OperationalError):  # the impostor closes after the password
            _connect(url_from_secret(_secret(server.port)))
    finally:
        server.close()
    assert server.handshakes == 1 and server.passwords == [PASSWORD]


def test_the_layer_ships_the_rds_global_bundle_of_root_authorities_only():
    certificates = x509.load_pem_x509_certificates(LAYER_BUNDLE.read_bytes())
    names = [c.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
             for c in certificates]
    assert len(certificates) >= 100
    assert all(n.startswith("Amazon RDS ") and " Root CA " in n for n in names), names
    for certificate in certificates:
        assert certificate.issuer == certificate.subject
        certificate.verify_directly_issued_by(certificate)
        assert certificate.not_valid_after_utc > NOW
    # Every commercial region's RSA2048 root is there, the default of new instances.
    assert {"Amazon RDS us-east-1 Root CA RSA2048 G1",
            "Amazon RDS eu-west-1 Root CA RSA2048 G1"} <= set(names)


def test_no_bundle_means_no_connection(monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_CA_BUNDLE", str(tmp_path / "missing.pem"))
    with pytest.raises(FileNotFoundError, match="missing.pem"):
        url_from_secret(_secret(5432))
    monkeypatch.delenv("DATABASE_CA_BUNDLE")
    monkeypatch.setattr(db_secrets, "_CA_BUNDLE_PLACES", (tmp_path / "a.pem",))
    with pytest.raises(FileNotFoundError, match="a.pem"):
        ca_bundle()


def test_a_url_secret_is_used_as_given():
    """A secret holding a whole URL (bring your own database) says its own TLS settings."""
    url = "postgresql+psycopg://u:p@db.example/x?sslmode=verify-full&sslrootcert=/etc/ca.pem"
    assert url_from_secret({"url": url}) == url


def test_the_bundle_is_where_lambda_unpacks_the_database_layer():
    """SAM's Python builder puts a layer's sources under python/, which Lambda unpacks at
    /opt/python: the first place the functions look."""
    layer = load_template()["Resources"]["DatabaseLayer"]
    assert layer["Metadata"]["BuildMethod"].startswith("python")
    assert (ROOT / layer["Properties"]["ContentUri"] / db_secrets.CA_BUNDLE_NAME).samefile(
        LAYER_BUNDLE)
    assert db_secrets._CA_BUNDLE_PLACES[0] == Path("/opt/python") / db_secrets.CA_BUNDLE_NAME
