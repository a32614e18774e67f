"""The registry of every message Strom speaks, loaded from schemas/*.schema.

    REQUESTS[api_key], RESPONSES[api_key]   MessageCodec per API
    API_NAMES[api_key]                       "Produce", "Fetch", ...
    DATA[name]                               other versioned structs (consumer protocol,
                                             metadata records by name)
    RECORDS[record_type]                     metadata log records by type id

Struct classes are reachable as attributes: ``messages.ProduceResponse``,
``messages.ProduceResponse.TopicProduceResponse``.
"""
from __future__ import annotations

import os

from protocol.codec import MessageCodec
from protocol.schema import parse

SCHEMA_DIR = os.path.join(os.path.dirname(__file__), "schemas")

REQUESTS: dict[int, MessageCodec] = {}
RESPONSES: dict[int, MessageCodec] = {}
API_NAMES: dict[int, str] = {}
API_KEYS: dict[str, int] = {}
DATA: dict[str, MessageCodec] = {}
RECORDS: dict[int, MessageCodec] = {}


def _load() -> None:
    for name in sorted(os.listdir(SCHEMA_DIR)):
        if not name.endswith(".schema"):
            continue
        path = os.path.join(SCHEMA_DIR, name)
        with open(path, encoding="utf-8") as f:
            for message in parse(f.read(), path):
                codec = MessageCodec(message)
                globals()[message.struct_name] = codec.cls
                if message.kind == "request":
                    REQUESTS[message.api_key] = codec
                    API_NAMES[message.api_key] = message.name
                    API_KEYS[message.name] = message.api_key
                elif message.kind == "response":
                    RESPONSES[message.api_key] = codec
                else:
                    DATA[message.name] = codec
                    if message.record_type is not None:
                        RECORDS[message.record_type] = codec
    for key in REQUESTS:
        if key not in RESPONSES:
            raise ValueError(f"{API_NAMES[key]}: request schema without a response schema")
        if REQUESTS[key].message.versions != RESPONSES[key].message.versions:
            raise ValueError(f"{API_NAMES[key]}: request and response versions differ")


_load()


def __getattr__(name: str):
    raise AttributeError(f"no message struct {name!r} (is its schema in {SCHEMA_DIR}?)")
