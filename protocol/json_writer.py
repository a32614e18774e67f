"""Messages as JSON, the way Kafka's generated ``*JsonConverter.write`` renders them (what
kafka-dump-log prints for metadata and control records, and what Kafka's request log shows).

Kafka's rules, from its message generator:

- an object per struct, its fields in schema order, each named by its camelCase name (the
  schema's ``topic_id`` is Kafka's ``TopicId``, written ``topicId``);
- only the fields the version has; a tagged field only when its value is not its default;
- int8/int16/int32/int64/uint16 as numbers, bool as true/false, float64 as Java's
  ``Double.toString`` writes it (``1.0``, ``1.0E7``), string as a JSON string, bytes as
  base64 (standard alphabet, padded), a uuid as Kafka's ``Uuid.toString`` (URL-safe base64,
  unpadded), records as an empty binary (``""``), null as null;
- compact: no spaces (Jackson's ``ObjectNode.toString``), non-ASCII text unescaped.
"""
from __future__ import annotations

import base64
import json
import math
from decimal import Decimal
from typing import Any

from protocol.codec import MessageCodec
from protocol.schema import Field, Struct

# Kafka's field names whose snake_case spelling loses their capitals ("KRaft").
_KAFKA_NAMES = {"kraft_version": "kRaftVersion", "kraft_version_feature": "kRaftVersionFeature",
                "is_kraft_controller": "isKRaftController"}


def camel_case(name: str) -> str:
    """Kafka's JSON name for a schema field: ``leader_recovery_state`` -> ``leaderRecoveryState``
    (``kraft_version``: Kafka's ``KRaftVersion``, ``kRaftVersion``)."""
    if name in _KAFKA_NAMES:
        return _KAFKA_NAMES[name]
    first, *rest = name.split("_")
    return first + "".join(part[:1].upper() + part[1:] for part in rest)


def uuid_string(raw: bytes) -> str:
    """Kafka's ``Uuid.toString``: the 16 bytes in URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(bytes(raw)).decode("ascii").rstrip("=")


def java_double(value: float) -> str:
    """Java's ``Double.toString``: plain from 10^-3 up to 10^7, else ``d.dddE[-]n``; always a
    digit after the point."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        text = repr(float(value))
        return text if "e" not in text else _scientific(value)
    return _scientific(value)


def _scientific(value: float) -> str:
    sign, digits, exponent = Decimal(repr(float(value))).as_tuple()
    assert isinstance(exponent, int)
    ds = list(digits)
    while len(ds) > 1 and ds[-1] == 0:
        ds.pop()
        exponent += 1
    power = exponent + len(ds) - 1
    fraction = "".join(map(str, ds[1:])) or "0"
    return f"{'-' if sign else ''}{ds[0]}.{fraction}E{power}"


def to_json(codec: MessageCodec, version: int, obj: Any) -> str:
    """``obj`` (a struct of ``codec``'s message) at ``version``, as Kafka's JsonConverter writes it."""
    codec.check_version(version)
    return _struct(codec.message.root, version, obj)


def _struct(struct: Struct, version: int, obj: Any) -> str:
    parts = []
    for f in struct.fields:
        if version not in f.versions:
            continue
        value = getattr(obj, f.name)
        if f.tag is not None and _is_default(f, value):
            continue
        parts.append(f"{json.dumps(camel_case(f.name))}:{_value(f, f.type, version, value)}")
    return "{" + ",".join(parts) + "}"


def _is_default(f: Field, value: Any) -> bool:
    default = f.default_value()
    if f.type == "uuid" and value is not None:
        return bytes(value) == bytes(default or bytes(16))
    if f.type == "bytes" and value is not None and default is not None:
        return bytes(value) == bytes(default)
    return bool(value == default)


def _value(f: Field, type_: str, version: int, value: Any) -> str:
    if value is None:
        return "null"
    if type_.startswith("[]"):
        element = type_[2:]
        return "[" + ",".join(_value(f, element, version, v) for v in value) + "]"
    if type_ == "bool":
        return "true" if value else "false"
    if type_ in ("int8", "int16", "int32", "int64", "uint16"):
        return str(int(value))
    if type_ == "float64":
        return java_double(value)
    if type_ == "string":
        return json.dumps(value, ensure_ascii=False)
    if type_ == "bytes":
        return json.dumps(base64.b64encode(bytes(value)).decode("ascii"))
    if type_ == "uuid":
        return json.dumps(uuid_string(value))
    if type_ == "records":
        return '""'
    assert f.struct is not None, f"{f.name}: struct type {type_} unresolved"
    return _struct(f.struct, version, value)
