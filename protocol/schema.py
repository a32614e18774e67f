"""The schema language: Kafka's message layouts written down as data.

A schema file holds message definitions. Each starts with a header line, then its fields,
indented; a field of struct type (``[]Name`` for an array of structs, or ``Name`` for one
struct) has its own fields indented below it::

    # comment
    request Produce key=0 versions=3-12 flexible=9+
      transactional_id  string   3+  nullable  default=null
      acks              int16
      timeout_ms        int32
      topic_data        []TopicProduceData
        name            string
        partition_data  []PartitionProduceData
          index         int32
          records       records  nullable

    response Produce key=0 versions=3-12 flexible=9+
      ...
      node_endpoints    []NodeEndpoint  10+  tag=0
        ...

    common NodeEndpoint          # a struct shared by fields of the message above
      node_id           int32

Header kinds: ``request``/``response`` (with ``key=``), ``header`` and ``data`` (any other
versioned struct: consumer protocol, metadata records with ``type=``). ``flexible=none``
for messages without flexible versions.

Field line: ``name type [versions] [nullable[=versions]] [tag=N] [default=V] [ignorable]``.
Types: int8 int16 int32 int64 uint16 float64 bool string bytes records uuid, ``[]T`` for
arrays of a primitive or a struct, or a struct name. Versions: ``N`` (only N), ``N+``,
``N-M``; a field without versions exists in every version of its message. ``tag=N`` makes
the field a tagged field (KIP-482) in flexible versions. Default values are Kafka's: 0,
false, "" and [] unless ``default=`` says otherwise (``default=null`` for null).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

PRIMITIVES = {"int8", "int16", "int32", "int64", "uint16", "float64", "bool", "string", "bytes",
              "records", "uuid"}

_VERSIONS = re.compile(r"^(\d+)(\+|-(\d+))?$")
MAX_VERSION = 2**15 - 1


class SchemaError(ValueError):
    pass


@dataclass(frozen=True)
class Versions:
    lo: int
    hi: int  # inclusive

    def __contains__(self, v: int) -> bool:
        return self.lo <= v <= self.hi

    @classmethod
    def parse(cls, text: str) -> Versions | None:
        if text == "none":
            return None
        m = _VERSIONS.match(text)
        if m is None:
            raise SchemaError(f"bad version range {text!r}")
        lo = int(m.group(1))
        if m.group(2) is None:
            return cls(lo, lo)
        if m.group(2) == "+":
            return cls(lo, MAX_VERSION)
        return cls(lo, int(m.group(3)))

    def __str__(self) -> str:
        if self.lo == self.hi:
            return str(self.lo)
        return f"{self.lo}+" if self.hi == MAX_VERSION else f"{self.lo}-{self.hi}"


ALL = Versions(0, MAX_VERSION)


@dataclass
class Field:
    name: str
    type: str  # a primitive, a struct name, or "[]" + either
    versions: Versions = ALL
    nullable: Versions | None = None
    tag: int | None = None
    default: object = None
    has_default: bool = False
    ignorable: bool = False
    struct: Struct | None = None  # for struct and []struct types

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element(self) -> str:
        return self.type[2:] if self.is_array else self.type

    def default_value(self):
        if self.has_default:
            return self.default
        if self.is_array:
            return []
        t = self.type
        if t in ("int8", "int16", "int32", "int64", "uint16"):
            return 0
        if t == "float64":
            return 0.0
        if t == "bool":
            return False
        if t == "string":
            return ""
        if t == "bytes":
            return b""
        if t == "uuid":
            return bytes(16)
        return None  # records, and single structs (filled in by the codec)


@dataclass
class Struct:
    name: str
    fields: list[Field] = field(default_factory=list)


@dataclass
class Message:
    kind: str  # request | response | header | data
    name: str  # e.g. "Produce" for request/response, the struct name otherwise
    api_key: int | None
    versions: Versions
    flexible: Versions | None
    root: Struct
    record_type: int | None = None

    @property
    def struct_name(self) -> str:
        if self.kind in ("request", "response"):
            return self.name + self.kind.capitalize()
        return self.name

    def is_flexible(self, version: int) -> bool:
        return self.flexible is not None and version in self.flexible


def _parse_default(text: str, type_: str):
    if text == "null":
        return None
    if type_ in ("int8", "int16", "int32", "int64", "uint16"):
        return int(text, 0)
    if type_ == "float64":
        return float(text)
    if type_ == "bool":
        if text not in ("true", "false"):
            raise SchemaError(f"bad bool default {text!r}")
        return text == "true"
    if type_ == "string":
        return "" if text == '""' else text
    raise SchemaError(f"defaults are not supported for type {type_}")


def _parse_field(tokens: list[str], where: str) -> Field:
    if len(tokens) < 2:
        raise SchemaError(f"{where}: a field needs a name and a type")
    f = Field(tokens[0], tokens[1])
    base = f.element
    if base not in PRIMITIVES and not base[:1].isupper():
        raise SchemaError(f"{where}: unknown type {f.type!r}")
    for token in tokens[2:]:
        key, _, value = token.partition("=")
        if _VERSIONS.match(token):
            f.versions = Versions.parse(token)
        elif key == "nullable":
            f.nullable = Versions.parse(value) if value else ALL
        elif key == "tag":
            f.tag = int(value)
        elif key == "default":
            f.default = _parse_default(value, f.type)
            f.has_default = True
        elif key == "ignorable":
            f.ignorable = True
        else:
            raise SchemaError(f"{where}: unknown field attribute {token!r}")
    return f


def _parse_header(kind: str, tokens: list[str], where: str) -> Message:
    if kind not in ("request", "response", "header", "data"):
        raise SchemaError(f"{where}: unknown definition {kind!r}")
    if len(tokens) < 2:
        raise SchemaError(f"{where}: missing name")
    attrs = dict(t.partition("=")[::2] for t in tokens[2:])
    unknown = set(attrs) - {"key", "versions", "flexible", "type"}
    if unknown:
        raise SchemaError(f"{where}: unknown attributes {sorted(unknown)}")
    if "versions" not in attrs:
        raise SchemaError(f"{where}: versions= is required")
    if kind in ("request", "response") and "key" not in attrs:
        raise SchemaError(f"{where}: {kind} needs key=")
    name = tokens[1]
    return Message(
        kind=kind,
        name=name,
        api_key=int(attrs["key"]) if "key" in attrs else None,
        versions=Versions.parse(attrs["versions"]),
        flexible=Versions.parse(attrs.get("flexible", "none")),
        root=Struct(name + kind.capitalize() if kind in ("request", "response") else name),
        record_type=int(attrs["type"]) if "type" in attrs else None,
    )


def parse(text: str, source: str = "<schema>") -> list[Message]:
    """Parse schema text into messages; struct references are resolved."""
    messages: list[Message] = []
    commons: dict[int, dict[str, Struct]] = {}
    # (indent of this struct's fields, or -1 before its first field; the struct)
    stack: list[list] = []
    current: Message | None = None

    for lineno, raw in enumerate(text.splitlines(), start=1):
        where = f"{source}:{lineno}"
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        tokens = line.split()
        if indent == 0:
            kind = tokens[0]
            if kind == "common":
                if current is None or len(tokens) != 2:
                    raise SchemaError(f"{where}: 'common Name' must follow a message")
                struct = Struct(tokens[1])
                commons.setdefault(id(current), {})[struct.name] = struct
                stack = [[-1, struct]]
                continue
            current = _parse_header(kind, tokens, where)
            messages.append(current)
            stack = [[-1, current.root]]
            continue
        if current is None:
            raise SchemaError(f"{where}: field outside a definition")
        if stack[-1][0] == -1:
            stack[-1][0] = indent
        while indent < stack[-1][0]:
            stack.pop()
            if not stack:
                raise SchemaError(f"{where}: inconsistent indentation")
        if indent > stack[-1][0]:
            struct = stack[-1][1]
            if not struct.fields:
                raise SchemaError(f"{where}: unexpected indentation")
            parent = struct.fields[-1]
            if parent.element in PRIMITIVES:
                raise SchemaError(f"{where}: {parent.name} of type {parent.type} cannot have fields")
            if parent.struct is not None:
                raise SchemaError(f"{where}: inconsistent indentation")
            parent.struct = Struct(parent.element)
            stack.append([indent, parent.struct])
        stack[-1][1].fields.append(_parse_field(tokens, where))

    for message in messages:
        _resolve(message, message.root, commons.get(id(message), {}), set())
    return messages


def _resolve(message: Message, struct: Struct, commons: dict[str, Struct], seen: set[str]) -> None:
    names = set()
    for f in struct.fields:
        if f.name in names:
            raise SchemaError(f"{message.struct_name}.{struct.name}: duplicate field {f.name}")
        names.add(f.name)
        if f.element in PRIMITIVES:
            continue
        if f.struct is None:
            if f.element not in commons:
                raise SchemaError(f"{message.struct_name}: struct {f.element} has no fields")
            f.struct = commons[f.element]
        if f.struct.name not in seen:
            _resolve(message, f.struct, commons, seen | {f.struct.name})
