"""Fixtures for the oracle tests: reference implementations that share no code with ext/.

kafka-python: its record batch reader/builder (kafka.record) is pure Python. It finds
snappy only through python-snappy, which is not installed here; ``kafka_python_snappy``
lends it cramjam's raw snappy primitive, so its own xerial framing code still runs.
"""
import types

import cramjam
import pytest


@pytest.fixture
def kafka_python_snappy(monkeypatch):
    import kafka.codec

    shim = types.SimpleNamespace(
        compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
        decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))),
    )
    monkeypatch.setattr(kafka.codec, "snappy", shim)
    assert kafka.codec.has_snappy()
