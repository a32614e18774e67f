"""One generic codec for every message the schemas describe.

For each struct a Python class is made (``__slots__`` = its fields across all versions;
nested structs hang off their parent class by struct name: ``ProduceResponse.
TopicProduceResponse``). For each (message, version) a reader and a writer are compiled
from the schema into closures, once, on first use.

Decoding refuses what Kafka's generated readers refuse: a null (length -1, or 0 when compact)
where the schema allows none at that version is a ProtocolError naming the field, as is any
length running past the bytes received (so a bad length never allocates); an array's elements
are never null. Encoding refuses such a null with ValueError.

Encoding produces *parts*: bytes, interleaved with any ``records`` value that is not a
buffer but a file slice (anything with a ``size`` attribute), so a Fetch response can be
sent with sendfile instead of copying record bytes (see broker/net).
"""
from __future__ import annotations

import keyword
from collections.abc import Callable
from typing import Any

from protocol.schema import PRIMITIVES, Field, Message, Struct
from protocol.types import ProtocolError, Reader, Writer


class KafkaStruct:
    """Base of every generated struct class."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()
    _defaults: dict[str, Any] = {}

    def __init__(self, **values: Any) -> None:
        # Every generated class has its own __init__ (_make_init); this one is the reference
        # it must agree with, and what a class whose field names are no Python names uses.
        for name in self._fields:
            if name in values:
                setattr(self, name, values.pop(name))
            else:
                default = self._defaults[name]
                setattr(self, name, default() if callable(default) else default)
        if values:
            raise TypeError(f"{type(self).__name__} has no fields {sorted(values)}")

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._fields)
        return f"{type(self).__name__}({inner})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(
            getattr(self, n) == getattr(other, n) for n in self._fields
        )

    def to_dict(self) -> dict[str, Any]:
        def conv(v):
            if isinstance(v, KafkaStruct):
                return v.to_dict()
            if isinstance(v, list):
                return [conv(x) for x in v]
            if isinstance(v, memoryview):
                return bytes(v)
            return v
        return {n: conv(getattr(self, n)) for n in self._fields}


def _make_class(struct: Struct, qualname: str,
                made: dict[int, type[KafkaStruct]] | None = None) -> type[KafkaStruct]:
    """``made`` (struct id -> class) gives a struct used in several places (a ``common``
    struct) one class, so that what the decoder builds equals what a caller builds."""
    if made is None:
        made = {}
    defaults: dict[str, Any] = {}
    nested: dict[str, type[KafkaStruct]] = {}
    for f in struct.fields:
        if f.struct is not None and f.struct.name not in nested:
            child = made.get(id(f.struct))
            if child is None:
                child = _make_class(f.struct, f"{qualname}.{f.struct.name}", made)
            nested[f.struct.name] = child
    for f in struct.fields:
        value = f.default_value()
        if f.is_array and value is not None:
            value = list  # a fresh list each time (default=null arrays stay None)
        elif f.struct is not None and not f.has_default and f.nullable is None:
            value = nested[f.struct.name]
        defaults[f.name] = value
    fields = tuple(f.name for f in struct.fields)
    body = {"__slots__": fields, "_fields": fields, "_defaults": defaults, "__qualname__": qualname,
            **nested}
    init = _make_init(fields, defaults, qualname)
    if init is not None:
        body["__init__"] = init
    cls = type(struct.name, (KafkaStruct,), body)
    made[id(struct)] = cls
    return cls


_MISSING = object()


def _make_init(fields: tuple[str, ...], defaults: dict[str, Any], qualname: str) -> Callable | None:
    """A struct's own ``__init__``, keyword-only, one assignment per field: the generic
    ``KafkaStruct.__init__`` loops over every field of every version with a dict lookup and a
    ``setattr`` each, and handlers build a struct per partition of every Fetch and Produce.
    A default that is callable (``list``, a nested struct) is called per instance, as there.
    None where a field name is not a plain Python name (the generic one serves then)."""
    if not all(n.isidentifier() and not keyword.iskeyword(n) and not n.startswith("_") for n in fields):
        return None
    namespace: dict[str, Any] = {"_MISSING": _MISSING}
    params, lines = [], []
    for i, name in enumerate(fields):
        default = defaults[name]
        namespace[f"_d{i}"] = default
        if callable(default):
            params.append(f"{name}=_MISSING")
            lines.append(f"    _self_.{name} = _d{i}() if {name} is _MISSING else {name}")
        else:
            params.append(f"{name}=_d{i}")
            lines.append(f"    _self_.{name} = {name}")
    star = ", *, " + ", ".join(params) if params else ""
    exec(f"def __init__(_self_{star}):\n" + ("\n".join(lines) or "    pass"), namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{qualname}.__init__"
    return init


# ---- readers -----------------------------------------------------------------------------

def null_field(where: str | None) -> None:
    """A null where the schema allows none: refused at parse time, as Kafka's generated
    readers do, so no handler ever iterates or echoes a null it did not expect."""
    if where is not None:
        raise ProtocolError(f"non-nullable field {where} was serialized as null")


def _read_string(flexible: bool, where: str | None = None) -> Callable[[Reader], str | None]:
    """``where``: the field's name when it is not nullable in this version (None: nullable)."""
    if flexible:
        def read(r: Reader):
            n = r.uvarint() - 1
            if n < 0:
                return null_field(where)
            return r.string_of(n)
    else:
        def read(r: Reader):
            n = r.int16()
            if n < 0:
                if n < -1:
                    raise ProtocolError(f"negative string length {n}")
                return null_field(where)
            return r.string_of(n)
    return read


def _read_bytes(flexible: bool, view: bool, where: str | None = None) -> Callable[[Reader], Any]:
    def get(r: Reader, n: int):
        data = r.raw(n)
        return data if view else bytes(data)
    if flexible:
        def read(r: Reader):
            n = r.uvarint() - 1
            if n < 0:
                return null_field(where)
            return get(r, n)
    else:
        def read(r: Reader):
            n = r.int32()
            if n < 0:
                if n < -1:
                    raise ProtocolError(f"negative bytes length {n}")
                return null_field(where)
            return get(r, n)
    return read


def _read_array(elem: Callable[[Reader], Any], flexible: bool,
                where: str | None = None) -> Callable[[Reader], list | None]:
    def read(r: Reader):
        n = (r.uvarint() - 1) if flexible else r.int32()
        if n < 0:
            if n < -1:
                raise ProtocolError(f"negative array length {n}")
            return null_field(where)
        if n > r.remaining():
            raise ProtocolError(f"array of {n} elements with {r.remaining()} bytes left")
        return [elem(r) for _ in range(n)]
    return read


_FIXED = {
    "int8": Reader.int8, "int16": Reader.int16, "uint16": Reader.uint16, "int32": Reader.int32,
    "int64": Reader.int64, "float64": Reader.float64, "bool": Reader.bool, "uuid": Reader.uuid,
}


class _Compiler:
    def __init__(self, message: Message, classes: dict[int, type[KafkaStruct]]):
        self.message = message
        self.classes = classes  # id(struct) -> class

    def reader(self, version: int) -> Callable[[Reader], KafkaStruct]:
        return self._struct_reader(self.message.root, version, self.message.is_flexible(version))

    def _field_reader(self, f: Field, version: int, flexible: bool):
        base = f.element
        # Null is refused where the schema does not allow it; an array's elements never are.
        where = None if f.nullable is not None and version in f.nullable else f.name
        elem_where = f.name if f.is_array else where
        if base in _FIXED:
            elem = _FIXED[base]
        elif base == "string":
            elem = _read_string(flexible, elem_where)
        elif base in ("bytes", "records"):
            elem = _read_bytes(flexible, base == "records", elem_where)
        else:
            elem = self._struct_reader(f.struct, version, flexible)
            if not f.is_array and f.nullable is not None and version in f.nullable:
                inner = elem

                def elem(r: Reader, inner=inner):
                    return None if r.int8() < 0 else inner(r)
        return _read_array(elem, flexible, where) if f.is_array else elem

    def _struct_reader(self, struct: Struct, version: int, flexible: bool):
        cls = self.classes[id(struct)]
        plan: list[tuple[str, Callable]] = []
        absent: list[tuple[str, Any]] = []
        tagged: dict[int, tuple[str, Callable]] = {}
        for f in struct.fields:
            present = version in f.versions
            if present and f.tag is not None and flexible:
                tagged[f.tag] = (f.name, self._field_reader(f, version, flexible))
                absent.append((f.name, cls._defaults[f.name]))
            elif present and f.tag is None:
                plan.append((f.name, self._field_reader(f, version, flexible)))
            else:
                absent.append((f.name, cls._defaults[f.name]))
        new = cls.__new__

        def read(r: Reader):
            obj = new(cls)
            for name, default in absent:
                setattr(obj, name, default() if callable(default) else default)
            for name, rd in plan:
                setattr(obj, name, rd(r))
            if flexible:
                for _ in range(r.uvarint()):
                    tag = r.uvarint()
                    size = r.uvarint()
                    end = r.pos + size
                    if end > r.end:
                        raise ProtocolError(f"tagged field {tag} overruns the message")
                    entry = tagged.get(tag)
                    if entry is not None:
                        sub = Reader(r.buf, r.pos, end)
                        setattr(obj, entry[0], entry[1](sub))
                    r.pos = end  # unknown tags are skipped (KIP-482)
            return obj
        return read

    # ---- writers ---------------------------------------------------------------------

    def writer(self, version: int) -> Callable[[Writer, Any], None]:
        return self._struct_writer(self.message.root, version, self.message.is_flexible(version))

    def _field_writer(self, f: Field, version: int, flexible: bool):
        base = f.element
        nullable = f.nullable is not None and version in f.nullable
        where = f"{self.message.struct_name}.{f.name} v{version}"
        if base in _FIXED:
            method = getattr(Writer, base)
            elem = method
        elif base == "string":
            def elem(w: Writer, v, nullable=nullable):
                if v is None:
                    if not nullable:
                        raise ValueError(f"{where} is not nullable")
                    w.uvarint(0) if flexible else w.int16(-1)
                    return
                data = v.encode()
                if flexible:
                    w.uvarint(len(data) + 1)
                else:
                    w.int16(len(data))
                w.raw(data)
        elif base in ("bytes", "records"):
            def elem(w: Writer, v, nullable=nullable):
                if v is None:
                    if not nullable:
                        raise ValueError(f"{where} is not nullable")
                    w.uvarint(0) if flexible else w.int32(-1)
                    return
                buffer = isinstance(v, (bytes, bytearray, memoryview))
                size = len(v) if buffer else v.size
                if flexible:
                    w.uvarint(size + 1)
                else:
                    w.int32(size)
                if buffer:
                    w.raw(v)
                elif size:
                    w.external(v)
        else:
            inner = self._struct_writer(f.struct, version, flexible)
            if not f.is_array and nullable:
                def elem(w: Writer, v, inner=inner):
                    if v is None:
                        w.int8(-1)
                    else:
                        w.int8(1)
                        inner(w, v)
            else:
                elem = inner
        if not f.is_array:
            return elem

        def write_array(w: Writer, v):
            if v is None:
                if not nullable:
                    raise ValueError(f"{where} is not nullable")
                w.uvarint(0) if flexible else w.int32(-1)
                return
            w.uvarint(len(v) + 1) if flexible else w.int32(len(v))
            for item in v:
                elem(w, item)
        return write_array

    def _struct_writer(self, struct: Struct, version: int, flexible: bool):
        cls = self.classes[id(struct)]
        plan: list[tuple[str, Callable]] = []
        tagged: list[tuple[int, str, Callable, Any]] = []
        for f in struct.fields:
            if version not in f.versions:
                continue
            if f.tag is not None:
                if flexible:
                    default = cls._defaults[f.name]
                    tagged.append((f.tag, f.name, self._field_writer(f, version, flexible), default))
                continue
            plan.append((f.name, self._field_writer(f, version, flexible)))
        tagged.sort()

        def write(w: Writer, obj):
            for name, wr in plan:
                wr(w, getattr(obj, name))
            if flexible:
                present = []
                for tag, name, wr, default in tagged:
                    value = getattr(obj, name, None)
                    if value is None or value == (default() if callable(default) else default):
                        continue
                    present.append((tag, wr, value))
                w.uvarint(len(present))
                for tag, wr, value in present:
                    sub = Writer()
                    wr(sub, value)
                    w.uvarint(tag)
                    w.uvarint(len(sub.buf))
                    w.raw(sub.buf)
        return write


class MessageCodec:
    """Encoder and decoder of one message, all its versions."""

    def __init__(self, message: Message):
        self.message = message
        self.classes: dict[int, type[KafkaStruct]] = {}
        self.cls = self._classes(message.root, message.struct_name)
        self._readers: dict[int, Callable] = {}
        self._writers: dict[int, Callable] = {}
        self._compiler = _Compiler(message, self.classes)

    def _classes(self, root: Struct, qualname: str) -> type[KafkaStruct]:
        cls = _make_class(root, qualname)

        def register(struct: Struct, c: type[KafkaStruct]) -> None:
            self.classes[id(struct)] = c
            for f in struct.fields:
                if f.struct is not None and id(f.struct) not in self.classes:
                    register(f.struct, getattr(c, f.struct.name))
        register(root, cls)
        # Every nested struct is also reachable from the root class by its (unique) name:
        # FetchResponse.PartitionData as well as FetchResponse.FetchableTopicResponse.PartitionData.
        for c in self.classes.values():
            if c is not cls and not hasattr(cls, c.__name__):
                setattr(cls, c.__name__, c)
        return cls

    def check_version(self, version: int) -> None:
        if version not in self.message.versions:
            raise ProtocolError(
                f"{self.message.struct_name} version {version} is not in {self.message.versions}"
            )

    def decode(self, version: int, data: bytes | bytearray | memoryview | Reader) -> KafkaStruct:
        read = self._readers.get(version)
        if read is None:
            self.check_version(version)
            read = self._readers[version] = self._compiler.reader(version)
        r = data if isinstance(data, Reader) else Reader(data)
        return read(r)

    def write(self, version: int, obj: Any, w: Writer) -> None:
        write = self._writers.get(version)
        if write is None:
            self.check_version(version)
            write = self._writers[version] = self._compiler.writer(version)
        write(w, obj)

    def encode(self, version: int, obj: Any) -> bytes:
        """The encoding as one bytes object (record values must be buffers)."""
        w = Writer()
        self.write(version, obj, w)
        if w.parts:
            raise ValueError("encode() got a file slice: use write() and Writer.finish()")
        return bytes(w.buf)


__all__ = ["KafkaStruct", "MessageCodec", "PRIMITIVES"]
