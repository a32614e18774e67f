"""TLS contexts from Kafka's ssl.* properties, on PEM material, with Python's ssl module.

Each listener's properties are read through ``config.listener_value(listener, property)``:
``listener.name.<listener>.<property>`` where set, else ``<property>`` (strom/config.py). The
properties, as Kafka's DefaultSslEngineFactory reads them for ``PEM`` stores:

| property                              | meaning here                                                       |
|---------------------------------------|--------------------------------------------------------------------|
| ssl.keystore.type                     | must be PEM (Kafka's default, JKS, is refused naming it)           |
| ssl.keystore.location                 | a PEM file: the private key and the certificate chain              |
| ssl.keystore.certificate.chain        | the chain as PEM text (with ssl.keystore.key, instead of a file)   |
| ssl.keystore.key                      | the private key as PEM text                                        |
| ssl.key.password                      | the password of an encrypted (PKCS#8) key                          |
| ssl.keystore.password                 | refused with PEM, as Kafka refuses it: only the key has a password |
| ssl.truststore.type                   | must be PEM                                                        |
| ssl.truststore.location               | a PEM file of trusted certificates                                 |
| ssl.truststore.certificates           | trusted certificates as PEM text                                   |
| ssl.truststore.password               | refused with PEM                                                   |
| ssl.client.auth                       | none, requested, required: whether a server asks for a client cert |
| ssl.enabled.protocols                 | TLSv1.2,TLSv1.3 (the lowest and highest named bound the context)   |
| ssl.protocol                          | TLSv1.3: checked to be a TLS protocol name                         |
| ssl.cipher.suites                     | TLS 1.2 suites, by IANA (Java) or OpenSSL name; empty: OpenSSL's   |
| ssl.endpoint.identification.algorithm | https: a client checks the server's host name; empty: it does not  |

Without a truststore the system's trusted CAs are used (Java's default truststore). An invalid
value raises ``SslConfigError`` naming the property.
"""
from __future__ import annotations

import logging
import os
import re
import ssl
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from protocol.context import KafkaPrincipal
from security.listener_ssl import listener_ssl_name
from security.ssl_principal import SslPrincipalMapper

log = logging.getLogger(__name__)

PEM = "PEM"
CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
TLS_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
SSL_PROTOCOLS = frozenset({"TLS", "TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"})

# The ssl.* properties of a listener (strom/config.py declares them with Kafka's types and defaults).
SSL_PROPERTIES = (
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.key.password", "ssl.keystore.password", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.certificates", "ssl.truststore.password", "ssl.client.auth", "ssl.enabled.protocols",
    "ssl.protocol", "ssl.cipher.suites", "ssl.endpoint.identification.algorithm",
    "ssl.principal.mapping.rules",
)


class SslConfigError(ValueError):
    """A bad ssl.* value: ``name`` is the property (as its listener override, where it was one)."""

    def __init__(self, name: str, message: str):
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message


class ListenerConfig(Protocol):
    def listener_value(self, listener_name: str | None, name: str, mechanism: str | None = None) -> Any: ...


@dataclass(frozen=True)
class _Stores:
    cert_chain: str | None  # PEM text of the key store's chain, or None
    key: str | None  # PEM text of its private key
    key_password: str | None
    trusted: str | None  # PEM text of the trust store's certificates; None: the system's


def _read(name: str, path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        raise SslConfigError(name, f"cannot read {path}: {e.strerror or e}") from None


def _stores(config: ListenerConfig, listener: str | None) -> _Stores:
    def get(name: str) -> Any:
        return config.listener_value(listener, name)

    for kind in ("keystore", "truststore"):
        if (get(f"ssl.{kind}.type") or "").upper() != PEM:
            if get(f"ssl.{kind}.location") or (kind == "keystore" and get("ssl.keystore.key")) or (
                    kind == "truststore" and get("ssl.truststore.certificates")):
                raise SslConfigError(f"ssl.{kind}.type", f"Strom reads PEM {kind}s only: set "
                                     f"ssl.{kind}.type=PEM (got {get(f'ssl.{kind}.type')})")
    chain = key = None
    location, inline_key, inline_chain = (get("ssl.keystore.location"), get("ssl.keystore.key"),
                                          get("ssl.keystore.certificate.chain"))
    if (inline_key or inline_chain) and location:
        raise SslConfigError("ssl.keystore.key", "set either ssl.keystore.location or ssl.keystore.key with "
                             "ssl.keystore.certificate.chain, not both")
    if inline_key or inline_chain:
        if not (inline_key and inline_chain):
            missing = "ssl.keystore.certificate.chain" if inline_key else "ssl.keystore.key"
            raise SslConfigError(missing, "required with " + ("ssl.keystore.key" if inline_key
                                                             else "ssl.keystore.certificate.chain"))
        key, chain = _pem_text(inline_key), _pem_text(inline_chain)
    elif location:
        key = chain = _read("ssl.keystore.location", location)
    if (key or location) and get("ssl.keystore.password"):
        raise SslConfigError("ssl.keystore.password", "SSL key store password cannot be specified with PEM "
                             "format, only key password may be specified (ssl.key.password)")
    trusted = None
    location, inline = get("ssl.truststore.location"), get("ssl.truststore.certificates")
    if location and inline:
        raise SslConfigError("ssl.truststore.certificates", "set either ssl.truststore.location or "
                             "ssl.truststore.certificates, not both")
    if inline:
        trusted = _pem_text(inline)
    elif location:
        trusted = _read("ssl.truststore.location", location)
    if trusted is not None and get("ssl.truststore.password"):
        raise SslConfigError("ssl.truststore.password", "SSL trust store password cannot be specified for "
                             "PEM format")
    return _Stores(chain, key, get("ssl.key.password") or None, trusted)


def _pem_text(value: Any) -> str:
    """Inline PEM from a properties file: Kafka takes it on one line with the newlines as written
    (escaped \\n become real ones in Java's Properties); tolerate spaces in place of newlines."""
    text = str(value).replace("\\n", "\n")
    if "\n" not in text.strip():
        text = re.sub(r"(-----BEGIN [A-Z ]+-----)\s*(.*?)\s*(-----END [A-Z ]+-----)",
                      lambda m: m.group(1) + "\n" + "\n".join(m.group(2).split()) + "\n" + m.group(3) + "\n",
                      text)
    return text


def _load_key_store(ctx: ssl.SSLContext, stores: _Stores) -> None:
    if stores.key is None or stores.cert_chain is None:
        return
    # The ssl module loads key and chain from files only: write them to a private temporary
    # directory for the moment it reads them.
    with tempfile.TemporaryDirectory(prefix="strom-tls-") as directory:
        chain_path = os.path.join(directory, "chain.pem")
        key_path = os.path.join(directory, "key.pem")
        for path, text in ((chain_path, stores.cert_chain), (key_path, stores.key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(text)
        try:
            ctx.load_cert_chain(chain_path, key_path, password=stores.key_password)
        except ssl.SSLError as e:
            name = "ssl.key.password" if stores.key_password is not None or "bad decrypt" in str(e) \
                else "ssl.keystore.location"
            raise SslConfigError(name, f"cannot load the key store's key and certificate chain: {e}") \
                from None
        except (TypeError, ValueError) as e:  # an encrypted key without its password
            raise SslConfigError("ssl.key.password", f"cannot load the key store's key: {e}") from None


def _load_trust_store(ctx: ssl.SSLContext, stores: _Stores, purpose: ssl.Purpose) -> None:
    if stores.trusted is None:
        ctx.load_default_certs(purpose)
        return
    try:
        ctx.load_verify_locations(cadata=stores.trusted)
    except (ssl.SSLError, ValueError) as e:
        raise SslConfigError("ssl.truststore.location", f"no certificate could be read: {e}") from None


def _protocols(ctx: ssl.SSLContext, config: ListenerConfig, listener: str | None) -> None:
    protocol = config.listener_value(listener, "ssl.protocol")
    if protocol and protocol not in SSL_PROTOCOLS:
        raise SslConfigError("ssl.protocol", f"{protocol} is not one of {', '.join(sorted(SSL_PROTOCOLS))}")
    enabled = config.listener_value(listener, "ssl.enabled.protocols") or []
    unknown = [p for p in enabled if p not in TLS_VERSIONS]
    if unknown:
        raise SslConfigError("ssl.enabled.protocols", f"unknown protocol {unknown[0]}: expected any of "
                             f"{', '.join(TLS_VERSIONS)}")
    if enabled:
        versions = sorted(TLS_VERSIONS[p] for p in enabled)
        ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]


def openssl_cipher_name(name: str) -> str:
    """An IANA (Java) TLS 1.2 suite name as OpenSSL names it (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 ->
    ECDHE-RSA-AES128-GCM-SHA256); an OpenSSL name is returned as it is."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    exchange, cipher = name[4:].split("_WITH_", 1)
    cipher = re.sub(r"AES_(\d+)", r"AES\1", cipher)
    cipher = cipher.replace("CHACHA20_POLY1305_SHA256", "CHACHA20_POLY1305")
    if cipher.endswith("_CBC_SHA"):
        cipher = cipher[:-len("_CBC_SHA")] + "_SHA"
    cipher = cipher.replace("_CBC_", "_")
    parts = [] if exchange == "RSA" else [exchange.replace("_", "-")]
    return "-".join(parts + [cipher.replace("_", "-")])


def _ciphers(ctx: ssl.SSLContext, config: ListenerConfig, listener: str | None) -> None:
    suites = config.listener_value(listener, "ssl.cipher.suites") or []
    # TLS 1.3's suites are not configurable through the ssl module: they are always offered.
    tls12 = [openssl_cipher_name(s) for s in suites if not re.fullmatch(r"TLS_(AES|CHACHA20)_\w+", s)]
    if not tls12:
        return
    try:
        ctx.set_ciphers(":".join(tls12))
    except ssl.SSLError:
        raise SslConfigError("ssl.cipher.suites", f"none of {', '.join(suites)} is a cipher suite this "
                             "OpenSSL knows") from None


def server_context(config: ListenerConfig, listener_name: str | None) -> ssl.SSLContext:
    """The context a listener serves TLS with (see the module doc)."""
    return _server_context(config, listener_name, _stores(config, listener_name))


def _server_context(config: ListenerConfig, listener_name: str | None, stores: _Stores) -> ssl.SSLContext:
    if stores.key is None:
        raise SslConfigError("ssl.keystore.location", f"listener {listener_name} serves TLS and needs a "
                             "key store (ssl.keystore.location, or ssl.keystore.key with "
                             "ssl.keystore.certificate.chain)")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols(ctx, config, listener_name)
    _ciphers(ctx, config, listener_name)
    _load_key_store(ctx, stores)
    auth = (config.listener_value(listener_name, "ssl.client.auth") or "none").lower()
    if auth not in CLIENT_AUTH:
        raise SslConfigError("ssl.client.auth", f"expected one of none, requested, required, got {auth}")
    ctx.verify_mode = CLIENT_AUTH[auth]
    if auth != "none":
        _load_trust_store(ctx, stores, ssl.Purpose.CLIENT_AUTH)
    # Session tickets would let a client resume without its certificate being checked again.
    ctx.options |= ssl.OP_NO_TICKET
    return ctx


def client_context(config: ListenerConfig, listener_name: str | None) -> ssl.SSLContext:
    """The context a node connects to another's ``listener_name`` with: it trusts the trust store,
    presents the key store's certificate if there is one (for a listener that requires one) and,
    with ssl.endpoint.identification.algorithm=https, checks the peer's host name."""
    stores = _stores(config, listener_name)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _protocols(ctx, config, listener_name)
    _ciphers(ctx, config, listener_name)
    algorithm = config.listener_value(listener_name, "ssl.endpoint.identification.algorithm") or ""
    if algorithm.lower() not in ("", "https"):
        raise SslConfigError("ssl.endpoint.identification.algorithm",
                             f"expected https or empty, got {algorithm}")
    ctx.check_hostname = algorithm.lower() == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    _load_trust_store(ctx, stores, ssl.Purpose.SERVER_AUTH)
    _load_key_store(ctx, stores)
    return ctx


def principal_mapper(config: ListenerConfig, listener_name: str | None) -> SslPrincipalMapper:
    rules = config.listener_value(listener_name, "ssl.principal.mapping.rules")
    try:
        return SslPrincipalMapper(rules)
    except ValueError as e:
        raise SslConfigError("ssl.principal.mapping.rules", str(e)) from None


# ---- a listener's certificate rotated without a restart (KIP-226) ----

PEM_ALIAS = "kafka"  # the one entry of Kafka's PEM key store
_SAN_TYPES = {"DNS": 2, "IP Address": 7, "email": 1, "URI": 6, "DirName": 4}


class _Overlay:
    """A listener's properties with its dynamic ones (the property names without their
    listener.name.<l> prefix) over the static config."""

    def __init__(self, config: ListenerConfig, listener: str, values: dict[str, str]):
        self.config, self.listener, self.values = config, listener.upper(), values

    def listener_value(self, listener_name: str | None, name: str, mechanism: str | None = None) -> Any:
        if (listener_name or "").upper() == self.listener and name in self.values:
            return self.values[name]
        return self.config.listener_value(listener_name, name, mechanism)


def _leaf_identity(stores: _Stores) -> tuple[str, str, set[tuple[int, str]]] | None:
    """The key store's certificate (the chain's first): its subject in RFC 2253 form, as
    X500Principal's toString writes it, and its subject alternative names as Java lists them."""
    if not stores.cert_chain:
        return None
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    try:
        cert = x509.load_pem_x509_certificate(stores.cert_chain.encode())
    except ValueError:
        return None
    der = cert.public_bytes(serialization.Encoding.DER)
    sans: set[tuple[int, str]] = set()
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        ext = None
    for general in ext or []:
        if isinstance(general, x509.DNSName):
            sans.add((2, general.value))
        elif isinstance(general, x509.IPAddress):
            sans.add((7, str(general.value)))
        elif isinstance(general, x509.RFC822Name):
            sans.add((1, general.value))
        elif isinstance(general, x509.UniformResourceIdentifier):
            sans.add((6, general.value))
    dn = subject_dn(der)
    return dn, ", ".join(dn.split(",")), sans


def _java_set(sans: set[tuple[int, str]]) -> str:
    return "[" + ", ".join(f"[{kind}, {value}]" for kind, value in sorted(sans)) + "]"


def ensure_compatible(old: _Stores, new: _Stores, allow_dn_changes: bool, allow_san_changes: bool) -> None:
    """Kafka's SslFactory.CertificateEntries.ensureCompatible: the new key store's certificate
    keeps the old one's subject (compared as RFC 2253 names, ignoring case) unless
    ssl.allow.dn.changes, and every old subject alternative name unless ssl.allow.san.changes;
    a trust store may not be added to a listener that had none. Raises SslConfigError."""
    before, after = _leaf_identity(old), _leaf_identity(new)
    if before is not None and after is not None:
        if not allow_dn_changes and before[0].lower() != after[0].lower():
            raise SslConfigError("ssl.keystore.location", "Keystore DistinguishedName does not match:  "
                                 f"existing={{alias={PEM_ALIAS}, DN={before[1]}}}, "
                                 f"new={{alias={PEM_ALIAS}, DN={after[1]}}}")
        if not allow_san_changes and not before[2] <= after[2]:
            raise SslConfigError("ssl.keystore.location", "Keystore SubjectAltNames do not match:  "
                                 f"existing={{alias={PEM_ALIAS}, SAN={_java_set(before[2])}}}, "
                                 f"new={{alias={PEM_ALIAS}, SAN={_java_set(after[2])}}}")
    if old.trusted is None and new.trusted is not None:
        raise SslConfigError("ssl.truststore.location", "Cannot add SSL truststore to an existing listener "
                             "for which no truststore was configured.")


def _client_of(stores: _Stores) -> ssl.SSLContext:
    """A client context with a store pair's trust and key, checking no host name (Kafka's
    SslEngineValidator engines)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    _load_trust_store(ctx, stores, ssl.Purpose.SERVER_AUTH)
    _load_key_store(ctx, stores)
    return ctx


def _handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext) -> None:
    """One TLS handshake between the two contexts in memory; ssl.SSLError if it fails."""
    server_in, server_out, client_in, client_out = (ssl.MemoryBIO() for _ in range(4))
    server = server_ctx.wrap_bio(server_in, server_out, server_side=True)
    client = client_ctx.wrap_bio(client_in, client_out, server_side=False)
    done = {"client": False, "server": False}
    for _ in range(16):
        for side, obj, out, peer in (("client", client, client_out, server_in),
                                     ("server", server, server_out, client_in)):
            if not done[side]:
                try:
                    obj.do_handshake()
                    done[side] = True
                except ssl.SSLWantReadError:
                    pass
            data = out.read()
            if data:
                peer.write(data)
        if all(done.values()):
            return
    raise ssl.SSLError("the handshake did not complete")


def validate_handshakes(old_context: ssl.SSLContext, old: _Stores, new_context: ssl.SSLContext,
                        new: _Stores) -> None:
    """Kafka's SslEngineValidator for the inter-broker listener: a client with the new stores
    completes a handshake with a server of the old ones, and a client with the old stores with a
    server of the new ones, so the brokers that have not reloaded yet and this one still trust
    each other. Raises SslConfigError with the handshake's reason."""
    for server_ctx, client_stores in ((old_context, new), (new_context, old)):
        try:
            _handshake(server_ctx, _client_of(client_stores))
        except ssl.SSLError as e:
            raise SslConfigError("ssl.truststore.location",
                                 f"javax.net.ssl.SSLHandshakeException: {e.reason or e}") from None


def _flag(value: Any) -> bool:
    return value is True or str(value).lower() == "true"


class ListenerTls:
    """A TLS listener's context, rebuilt when its dynamic ssl.* configs change (Kafka's
    SslFactory.validateReconfiguration and reconfigure). ``values``: the dynamic configs the
    context was built with, by property name without the listener prefix."""

    def __init__(self, config: ListenerConfig, listener: str, context: ssl.SSLContext | None = None,
                 inter_broker: bool = False):
        self.config, self.listener = config, listener.upper()
        self.inter_broker = inter_broker  # its stores must let old and new peers shake hands
        self.values: dict[str, str] = {}
        self.stores = _stores(config, self.listener)
        self.context = context or _server_context(config, self.listener, self.stores)

    def prefixed(self, name: str) -> str:
        return f"listener.name.{self.listener.lower()}.{name}"

    def build(self, values: dict[str, str]) -> tuple[ssl.SSLContext, _Stores]:
        """The context these dynamic configs make, checked against the one serving: every file
        read again (so the same path rotates what it now holds). Raises SslConfigError naming
        the listener's property."""
        view = _Overlay(self.config, self.listener, values)
        try:
            stores = _stores(view, self.listener)
            context = _server_context(view, self.listener, stores)
            ensure_compatible(self.stores, stores,
                              _flag(view.listener_value(self.listener, "ssl.allow.dn.changes")),
                              _flag(view.listener_value(self.listener, "ssl.allow.san.changes")))
            if self.inter_broker:
                validate_handshakes(self.context, self.stores, context, stores)
        except SslConfigError as e:
            raise SslConfigError(self.prefixed(e.name),
                                 f"Validation of dynamic config update of SSLFactory failed: {e.message}") \
                from None
        return context, stores

    def reload(self, values: dict[str, str]) -> ssl.SSLContext:
        """Build and take the new context (raises as build does, leaving the old one)."""
        context, stores = self.build(values)
        self.values, self.stores, self.context = dict(values), stores, context
        return context


def listener_values(dynamic: dict[str, str], listener: str) -> dict[str, str]:
    """The dynamic ssl.* configs of one listener, by property name, out of a broker's dynamic
    configs (listener.name.<l>.<property>)."""
    out = {}
    for name, value in dynamic.items():
        parsed = listener_ssl_name(name)
        if parsed is not None and parsed[0] == listener.upper():
            out[parsed[1]] = value
    return out


class TlsReloader:
    """A broker's TLS listeners, each context rebuilt from the broker's dynamic configs and
    handed to ``swap(listener, context)`` (the server then handshakes every new connection with
    it; those open keep theirs). A reload that fails leaves the old context serving and says why
    in one WARNING line."""

    def __init__(self, listeners: Iterable[ListenerTls], swap: Callable[[str, ssl.SSLContext], None]):
        self.listeners = {lt.listener: lt for lt in listeners}
        self.swap = swap
        self._seen: dict[str, dict[str, str]] = {}

    @classmethod
    def of(cls, config: Any, names: Iterable[str],
           swap: Callable[[str, ssl.SSLContext], None]) -> TlsReloader:
        """Over the listeners among ``names`` that serve TLS (``config.ssl_server_context``)."""
        listeners = []
        for name in names:
            context = config.ssl_server_context(name)
            if context is not None:
                inter_broker = name.upper() == str(getattr(config, "inter_broker_listener_name", "")).upper()
                listeners.append(ListenerTls(config, name, context, inter_broker))
        return cls(listeners, swap)

    def apply(self, dynamic: dict[str, str]) -> None:
        """A new metadata image: each listener whose dynamic ssl.* configs changed reloads."""
        for name, lt in self.listeners.items():
            values = listener_values(dynamic, name)
            if values == self._seen.get(name, lt.values):
                continue
            self._seen[name] = values
            try:
                context = lt.reload(values)
            except (ValueError, OSError) as e:  # SslConfigError, or a store that will not parse
                log.warning("listener %s keeps serving its TLS context: %s", name, e)
                continue
            self.swap(name, context)
            log.info("listener %s serves new connections with a reloaded TLS context (%s)", name,
                     ", ".join(sorted(values)) or "its static ssl.* properties")

    def check(self, changes: dict[str, str | None], dynamic: dict[str, str], validate_only: bool) -> None:
        """A change of this broker's configs, before it is forwarded (Kafka's ConfigAdminManager
        validating it): each listener it touches must build a context (SslConfigError if not);
        one whose configs it sets again unchanged reloads its files now, as Kafka's
        reloadUpdatedFilesWithoutConfigChange, since no record will change."""
        resulting = dict(dynamic)
        for name, value in changes.items():
            if value is None:
                resulting.pop(name, None)
            else:
                resulting[name] = value
        touched = {parsed[0] for parsed in map(listener_ssl_name, changes) if parsed is not None}
        for name in sorted(touched):
            lt = self.listeners.get(name)
            if lt is None:
                continue  # not a TLS listener of this broker: nothing to rebuild
            values = listener_values(resulting, name)
            context, stores = lt.build(values)
            if values == lt.values and not validate_only:
                lt.values, lt.stores, lt.context = dict(values), stores, context
                self.swap(name, context)
                log.info("listener %s serves new connections with its key and trust stores read again", name)


# ---- the peer certificate's subject, as Java's X500Principal.getName() (RFC 2253) writes it ----

# The attribute keywords RFC 2253 names (others are written as their OID, the value as #hex DER).
_KEYWORDS = {"2.5.4.3": "CN", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O", "2.5.4.11": "OU",
             "2.5.4.6": "C", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
             "0.9.2342.19200300.100.1.1": "UID"}


def subject_dn(der: bytes) -> str:
    """The subject of a DER certificate in RFC 2253 form: most specific RDN first, values escaped."""
    from cryptography import x509  # only when a client presents a certificate

    cert = x509.load_der_x509_certificate(der)
    rdns = []
    for rdn in reversed(list(cert.subject.rdns)):
        avas = []
        for attr in rdn:
            keyword = _KEYWORDS.get(attr.oid.dotted_string)
            if keyword is None:
                avas.append(f"{attr.oid.dotted_string}=#{_der_value(attr).hex()}")
            else:
                avas.append(f"{keyword}={_escape(str(attr.value))}")
        rdns.append("+".join(avas))
    return ",".join(rdns)


def _der_value(attr: Any) -> bytes:
    tag = getattr(getattr(attr, "_type", None), "value", 12)  # UTF8String unless it says otherwise
    value = attr.value if isinstance(attr.value, bytes) else str(attr.value).encode(
        "utf-16-be" if tag == 30 else "utf-8")
    n = len(value)
    length = bytes([n]) if n < 128 else bytes([0x80 | ((n.bit_length() + 7) // 8)]) + n.to_bytes(
        (n.bit_length() + 7) // 8, "big")
    return bytes([tag]) + length + value


def _escape(value: str) -> str:
    out = []
    for i, c in enumerate(value):
        if c in ',+"\\<>;' or (i == 0 and c in "# ") or (i == len(value) - 1 and c == " "):
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def peer_principal(ssl_object: ssl.SSLObject | ssl.SSLSocket | None,
                   mapper: SslPrincipalMapper) -> KafkaPrincipal:
    """The principal of a TLS connection (Kafka's DefaultKafkaPrincipalBuilder): ``User:`` and the
    peer certificate's mapped subject; ``User:ANONYMOUS`` without one. NoMatchingRule (a
    ValueError) if no rule applies."""
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    return mapper.principal(subject_dn(der) if der else None)
