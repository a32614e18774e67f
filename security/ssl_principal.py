"""The principal of a TLS connection: the client certificate's subject, mapped by rules.

Kafka's DefaultKafkaPrincipalBuilder names an SSL connection's principal ``User:<name>``, where
the name is the peer certificate's subject distinguished name in RFC 2253 form (as Java's
``X500Principal.getName()`` writes it: most specific attribute first, ``CN=alice,OU=Clients,O=Org``)
passed through ``ssl.principal.mapping.rules``; a connection without a client certificate is
``User:ANONYMOUS``.

The rules (Kafka's SslPrincipalMapper), a comma-separated list tried in order, the first that
applies giving the name:

| rule                           | applies when                     | gives                              |
|--------------------------------|----------------------------------|------------------------------------|
| ``DEFAULT``                    | always                           | the DN unchanged                   |
| ``RULE:pattern/replacement/``  | ``pattern`` matches the whole DN | the DN with ``pattern`` replaced   |
| ``RULE:pattern/replacement/L`` | as above                         | that, in lower case (``U``: upper) |

Patterns and replacements are Java's: ``$1`` names a group, ``\\`` escapes the next character
(``\\/`` a slash inside a rule, ``\\,`` a comma); a ``$n`` past the pattern's groups is the literal
text, as Kafka reads it. No rule applying is an error: the connection is refused.
"""
from __future__ import annotations

import re

from protocol.context import ANONYMOUS, USER_TYPE, KafkaPrincipal

DEFAULT_RULES = "DEFAULT"

# Kafka's RULE_PATTERN: DEFAULT | RULE:pattern/replacement/[LU] | anything else (an error).
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSER = re.compile(_RULE)


class NoMatchingRule(ValueError):
    """No rule of ``ssl.principal.mapping.rules`` applies to a DN."""


class Rule:
    __slots__ = ("is_default", "pattern", "replacement", "case")

    def __init__(self, pattern: str | None = None, replacement: str | None = None, case: str = ""):
        self.is_default = pattern is None
        self.pattern = None if pattern is None else re.compile(_java_regex(pattern))
        self.replacement = replacement
        self.case = case  # "L", "U" or ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        replacement = self.replacement or ""
        result = self.pattern.sub(lambda m: _java_replacement(replacement, m), dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        text = "RULE:" + self.pattern.pattern
        if self.replacement is not None:
            text += "/" + self.replacement
        if self.case:
            text += "/" + self.case
        return text


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules`` parsed (ValueError naming the bad rule)."""

    def __init__(self, rules: str | None = DEFAULT_RULES):
        self.rules = [rule for rule in map(_parse_rule, _split(rules)) if rule is not None]

    def name(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"no rule of ssl.principal.mapping.rules applies to {dn}, rules "
                             f"[{', '.join(map(str, self.rules))}]")

    def principal(self, dn: str | None) -> KafkaPrincipal:
        """``User:<mapped DN>``; no certificate (``None``): ``User:ANONYMOUS``."""
        if dn is None:
            return ANONYMOUS
        return KafkaPrincipal(USER_TYPE, self.name(dn))

    def __str__(self) -> str:
        return f"SslPrincipalMapper(rules = [{', '.join(map(str, self.rules))}])"


def _split(rules: str | None) -> list[str]:
    text = (DEFAULT_RULES if rules is None else rules).strip()
    return [m.group(1) for m in _SPLITTER.finditer(text)]


def _parse_rule(rule: str) -> Rule | None:
    m = _PARSER.match(rule)
    if m is None:
        raise ValueError(f"Invalid rule: {rule}")
    if m.end() != len(rule):
        raise ValueError(f"Invalid rule: `{rule}`, unmatched substring: `{rule[m.end():]}`")
    if m.group(1) is not None:
        return Rule()
    if m.group(2) is not None:
        return Rule(m.group(2), m.group(3), m.group(4))
    if m.group(5):
        raise ValueError(f"Invalid rule: `{rule}`")
    return None  # an empty rule is ignored


def _java_regex(pattern: str) -> str:
    """The few places Java's regex syntax differs from Python's, for a DN pattern: possessive
    quantifiers and atomic groups are Python's too (3.11); ``\\Q...\\E`` quoting is translated."""
    return re.sub(r"\\Q(.*?)(?:\\E|$)", lambda m: re.escape(m.group(1)), pattern)


def _java_replacement(replacement: str, m: re.Match) -> str:
    """Java's Matcher.appendReplacement: ``\\x`` is x, ``$n`` is group n (digits taken while the
    number names a group); Kafka turns a ``$n`` past the groups into the literal text."""
    groups = m.re.groups
    out = []
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
        elif c == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit() and groups > 0:
            number = int(replacement[i + 1])
            if number > groups:
                out.append("$")
                i += 1
                continue
            i += 2
            while (i < len(replacement) and replacement[i].isdigit()
                   and number * 10 + int(replacement[i]) <= groups):
                number = number * 10 + int(replacement[i])
                i += 1
            out.append(m.group(number) or "")
        else:
            out.append(c)
            i += 1
    return "".join(out)
