"""Java's hashing as Kafka uses it to place things: ``String.hashCode``, ``Utils.abs`` and
int overflow. Python's ``hash()`` differs and is salted per process, so every placement Kafka
computes with these (a group's or transactional id's coordinator partition, a partition's
replica fetcher) is computed here.
"""
from __future__ import annotations

INT_MIN = -(1 << 31)


def int32(n: int) -> int:
    """``n`` wrapped to a Java int (32-bit two's complement)."""
    n &= 0xFFFFFFFF
    return n - 0x100000000 if n & 0x80000000 else n


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode``: h = 31 * h + c over the UTF-16 code units, a signed int32."""
    units = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return int32(h)


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: |n|, with Integer.MIN_VALUE mapped to 0 rather than overflowing."""
    return 0 if n == INT_MIN else abs(n)


def coordinator_partition(key: str, partitions: int) -> int:
    """The partition of a coordinator's topic that holds ``key`` (a group id in
    ``__consumer_offsets``, a transactional id in ``__transaction_state``): Kafka's
    ``partitionFor``, Utils.abs(key.hashCode()) % partitions."""
    return kafka_abs(java_string_hash(key)) % partitions
