"""A test certificate authority: PEM files for TLS tests, made with ``cryptography``.

``make_pki(directory)`` writes, and returns the paths of:

| name       | what                                                  | subject (RFC 2253)                |
|------------|-------------------------------------------------------|-----------------------------------|
| ca         | the trusted CA (a broker's and a client's truststore) | CN=Strom Test CA,O=Strom Test     |
| other_ca   | a second CA nobody trusts                             | CN=Other CA,O=Elsewhere           |
| server     | 127.0.0.1 and localhost (SAN), signed by ca           | CN=localhost,OU=Brokers,O=...     |
| alice, bob | client certificates signed by ca                      | CN=alice,OU=Clients,O=Strom Test  |
| expired    | a client certificate of ca that expired a day ago     | CN=expired,OU=Clients,O=...       |
| untrusted  | a client certificate signed by other_ca               | CN=mallory,OU=Clients,O=Elsewhere |

Each ``Identity`` has ``cert`` (the certificate, then its CA's: a chain), ``key`` (PKCS#8, not
encrypted), ``keystore`` (key then chain in one file: ``ssl.keystore.location`` with
``ssl.keystore.type=PEM``) and ``encrypted_key`` (PKCS#8 encrypted with ``KEY_PASSWORD``). Keys
are EC P-256: quick to make, and every client library takes them.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

KEY_PASSWORD = "key-secret"
ORG = "Strom Test"


@dataclass(frozen=True)
class Identity:
    name: str
    cert: str  # PEM: this certificate, then its CA's
    key: str  # PEM PKCS#8
    keystore: str  # PEM: key, then the chain
    encrypted_key: str  # PEM encrypted PKCS#8, password KEY_PASSWORD
    subject: str  # RFC 2253, as Java's X500Principal.getName() writes it

    def read(self, which: str = "cert") -> str:
        with open(getattr(self, which)) as f:
            return f.read()


@dataclass(frozen=True)
class Pki:
    directory: str
    ca: str  # PEM of the trusted CA's certificate
    other_ca: str  # PEM of a CA nobody trusts
    server: Identity
    alice: Identity
    bob: Identity
    expired: Identity
    untrusted: Identity


def _name(cn: str, ou: str | None, o: str) -> x509.Name:
    # Written most significant first (O, OU, CN): RFC 2253 reverses it to CN=...,OU=...,O=...
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o)]
    if ou is not None:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _ca(cn: str, o: str, now: datetime.datetime):
    key = _key()
    name = _name(cn, None, o)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return key, cert


def _leaf(ca_key, ca_cert, subject: x509.Name, *, server: bool, not_before, not_after):
    key = _key()
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(not_before).not_valid_after(not_after)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                              critical=False)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                     ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def _pem(cert) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _write(path: str, data: bytes) -> str:
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)
    return path


def _identity(directory: str, name: str, key, cert, ca_cert) -> Identity:
    chain = _pem(cert) + _pem(ca_cert)
    plain = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption())
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(KEY_PASSWORD.encode()))
    return Identity(
        name=name,
        cert=_write(os.path.join(directory, f"{name}.pem"), chain),
        key=_write(os.path.join(directory, f"{name}.key"), plain),
        keystore=_write(os.path.join(directory, f"{name}-keystore.pem"), plain + chain),
        encrypted_key=_write(os.path.join(directory, f"{name}-encrypted.key"), encrypted),
        subject=cert.subject.rfc4514_string())


def make_pki(directory) -> Pki:
    """Write a fresh CA, an untrusted CA and their certificates into ``directory`` (see the module doc)."""
    directory = str(directory)
    os.makedirs(directory, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key, ca_cert = _ca("Strom Test CA", ORG, now)
    other_key, other_cert = _ca("Other CA", "Elsewhere", now)
    valid = {"not_before": now - datetime.timedelta(days=1), "not_after": now + datetime.timedelta(days=365)}

    def leaf(name, cn, ou, o=ORG, issuer=(ca_key, ca_cert), server=False, **when):
        key, cert = _leaf(issuer[0], issuer[1], _name(cn, ou, o), server=server, **(when or valid))
        return _identity(directory, name, key, cert, issuer[1])

    return Pki(
        directory=directory,
        ca=_write(os.path.join(directory, "ca.pem"), _pem(ca_cert)),
        other_ca=_write(os.path.join(directory, "other-ca.pem"), _pem(other_cert)),
        server=leaf("server", "localhost", "Brokers", server=True),
        alice=leaf("alice", "alice", "Clients"),
        bob=leaf("bob", "bob", "Clients"),
        expired=leaf("expired", "expired", "Clients", not_before=now - datetime.timedelta(days=30),
                     not_after=now - datetime.timedelta(days=1)),
        untrusted=leaf("untrusted", "mallory", "Clients", o="Elsewhere", issuer=(other_key, other_cert)),
    )
