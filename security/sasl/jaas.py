"""Kafka's ``sasl.jaas.config`` syntax, as its JaasConfig reads it (a Java StreamTokenizer):

    <login module class> <control flag> [<key>=<value> ...];  [another entry ...]

Words are letters, digits and ``.-_$``; a value may also be double-quoted (with Java's
escapes: ``\\"``, ``\\\\``, ``\\n``, ``\\t``, octal). ``//`` and ``/* */`` are comments. The control flag
is one of required, requisite, sufficient, optional (any case). Every entry ends with ``;``.

One parser for every mechanism, server and client side: the server reads PLAIN's user list
(``user_<name>="<password>"``, Kafka's PlainServerCallbackHandler), a client its ``username``
and ``password``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"

_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_$")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "a": "\a", "v": "\v"}


class JaasConfigError(ValueError):
    """A ``sasl.jaas.config`` that Kafka's JaasConfig would refuse, with its message."""


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) pairs: ("word", w), ("quoted", s) or ("char", c)."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif c in _WORD_CHARS:
            j = i
            while j < n and text[j] in _WORD_CHARS:
                j += 1
            out.append(("word", text[i:j]))
            i = j
        elif c in "\"'":
            i, value = _quoted(text, i + 1, c)
            out.append(("quoted", value))
        else:
            out.append(("char", c))
            i += 1
    return out


def _quoted(text: str, i: int, quote: str) -> tuple[int, str]:
    """A quoted string from just after its opening quote; StreamTokenizer ends one at the
    closing quote, a newline or the end of the text."""
    chars: list[str] = []
    n = len(text)
    while i < n and text[i] != quote and text[i] != "\n":
        c = text[i]
        if c == "\\" and i + 1 < n:
            nxt = text[i + 1]
            if nxt in "01234567":
                j = i + 1
                while j < n and j < i + 4 and text[j] in "01234567":
                    j += 1
                chars.append(chr(int(text[i + 1:j], 8) & 0xFF))
                i = j
                continue
            chars.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        chars.append(c)
        i += 1
    return i + 1, "".join(chars)


def parse_jaas_config(text: str) -> list[JaasEntry]:
    """The entries of a ``sasl.jaas.config`` value; JaasConfigError with Kafka's message."""
    tokens = _tokens(text)
    entries: list[JaasEntry] = []
    i = 0
    while i < len(tokens):
        kind, module = tokens[i]
        if kind == "char":
            raise JaasConfigError(f"Unexpected {module!r} in JAAS config where a login module was expected")
        i += 1
        if i >= len(tokens):
            raise JaasConfigError("Login module control flag not specified in JAAS config")
        kind, flag = tokens[i]
        if kind == "char" or flag.lower() not in CONTROL_FLAGS:
            raise JaasConfigError(f"Invalid login module control flag '{flag}' in JAAS config")
        i += 1
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i] != ("char", ";"):
            kind, key = tokens[i]
            if (kind == "char" or i + 2 >= len(tokens) or tokens[i + 1] != ("char", "=")
                    or tokens[i + 2][0] == "char"):
                raise JaasConfigError(f"Value not specified for key '{key}' in JAAS config")
            options[key] = tokens[i + 2][1]
            i += 3
        if i >= len(tokens):
            raise JaasConfigError("JAAS config entry not terminated by semi-colon")
        i += 1  # the ";"
        entries.append(JaasEntry(module, flag.lower(), options))
    if not entries:
        raise JaasConfigError("Login module not specified in JAAS config")
    return entries


def login_entry(text: str, login_module: str | None = None) -> JaasEntry:
    """The one entry of a listener's or client's jaas config (Kafka requires exactly one for a
    mechanism), checked to name ``login_module`` when given."""
    entries = parse_jaas_config(text)
    if len(entries) != 1:
        raise JaasConfigError(f"JAAS config property contains {len(entries)} login modules, "
                              "should be 1 module")
    entry = entries[0]
    if login_module is not None and entry.login_module != login_module:
        raise JaasConfigError(f"expected the login module {login_module}, got {entry.login_module}")
    return entry


def plain_users(entry: JaasEntry) -> dict[str, str]:
    """PLAIN's users: each ``user_<name>`` option's name and password (PlainServerCallbackHandler)."""
    return {key[len("user_"):]: value for key, value in entry.options.items() if key.startswith("user_")}
