"""`strom dump-log`: print what a node's files hold, as kafka-dump-log.sh does, by file type:

    .log          the batches (``--records``: and their records)
    .index        ``offset: N position: P`` per entry
    .timeindex    ``timestamp: T offset: N`` per entry
    .txnindex     the aborted transactions (version, producerId, first, last and last stable offset)
    .snapshot     a producer state snapshot's producers
    quorum-state  the KRaft election state (JSON), as stored

A directory dumps each such file in it by name. An index's zero slots past its entries (a
sparse file's tail) end it, as Kafka's tool stops at the first entry that repeats the base offset.
"""
from __future__ import annotations

import json
import os
import struct
import sys

_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_OFFSET_ENTRY = struct.Struct(">ii")  # relative offset, position
_TIME_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
QUORUM_STATE = "quorum-state"


def base_offset(path: str) -> int:
    name = os.path.basename(path).split(".", 1)[0]
    return int(name) if name.isdigit() else 0


def dump_segment(file: str, with_records: bool) -> None:
    """A .log segment's batches (and records), as kafka-dump-log prints them."""
    from ext.batch import decode_records, read_header, scan
    from ext.crc import crc32c

    with open(file, "rb") as f:
        data = f.read()
    position = 0
    while position < len(data):
        summary = scan(data, position, False, True)
        for rel in summary.positions:
            h = read_header(data, position + rel)
            crc_ok = crc32c(memoryview(data)[h.position + 21:h.position + h.size]) == h.crc
            print(f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
                  f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} "
                  f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
                  f"partitionLeaderEpoch: {h.partition_leader_epoch} isTransactional: "
                  f"{str(h.is_transactional).lower()} isControl: {str(h.is_control).lower()} "
                  f"position: {h.position} CreateTime: {h.max_timestamp} size: {h.size} "
                  f"magic: {h.magic} compresscodec: {_CODECS.get(h.compression, h.compression)} "
                  f"crc: {h.crc} isvalid: {str(crc_ok).lower()}")
            if with_records:
                for r in decode_records(data, h.position, False):
                    print(f"| offset: {r.offset} CreateTime: {r.timestamp} "
                          f"keySize: {-1 if r.key is None else len(r.key)} "
                          f"valueSize: {-1 if r.value is None else len(r.value)} "
                          f"headerKeys: [{','.join(k for k, _ in r.headers)}]")
        position += summary.valid_bytes
        if summary.error is not None:
            print(f"Found {len(data) - position} invalid bytes at position {position}: {summary.error}")
            break


def dump_index(file: str) -> None:
    base = base_offset(file)
    with open(file, "rb") as f:
        data = f.read()
    for i, (relative, position) in enumerate(_OFFSET_ENTRY.iter_unpack(data[:len(data) // 8 * 8])):
        if i > 0 and relative == 0:
            return
        print(f"offset: {base + relative} position: {position}")


def dump_time_index(file: str) -> None:
    base = base_offset(file)
    with open(file, "rb") as f:
        data = f.read()
    for i, (timestamp, relative) in enumerate(_TIME_ENTRY.iter_unpack(data[:len(data) // 12 * 12])):
        if i > 0 and relative == 0 and timestamp == 0:
            return
        print(f"timestamp: {timestamp} offset: {base + relative}")


def dump_txn_index(file: str) -> None:
    from engine.txn_index import ABORTED_TXN_VERSION, read_aborted_txns

    for t in read_aborted_txns(file):
        print(f"version: {ABORTED_TXN_VERSION} producerId: {t.producer_id} firstOffset: {t.first_offset} "
              f"lastOffset: {t.last_offset} lastStableOffset: {t.last_stable_offset}")


def dump_producer_snapshot(file: str) -> None:
    from engine.producer_state import CorruptSnapshotError, ProducerStateManager

    state = ProducerStateManager()
    with open(file, "rb") as f:
        data = f.read()
    try:
        state.load_snapshot(data)
    except CorruptSnapshotError as e:
        print(e, file=sys.stderr)
        return
    for pid, entry in state.producers.items():
        line = (f"producerId: {pid} producerEpoch: {entry.epoch} "
                f"coordinatorEpoch: {entry.coordinator_epoch} "
                f"currentTxnFirstOffset: {entry.current_txn_first_offset} "
                f"lastTimestamp: {entry.last_timestamp} ")
        if entry.batches:
            b = entry.batches[-1]
            line += (f"firstSequence: {b.first_seq} lastSequence: {b.last_seq} lastOffset: {b.last_offset} "
                     f"offsetDelta: {b.last_offset - b.first_offset} timestamp: {entry.last_timestamp}")
        print(line)


def dump_quorum_state(file: str) -> None:
    with open(file) as f:
        print(json.dumps(json.load(f), separators=(",", ":")))


def dump_file(file: str, with_records: bool) -> None:
    name = os.path.basename(file)
    if name == QUORUM_STATE:
        print(f"Dumping {file}")
        dump_quorum_state(file)
        return
    suffix = os.path.splitext(name)[1]
    dumpers = {".log": lambda: dump_segment(file, with_records), ".index": lambda: dump_index(file),
               ".timeindex": lambda: dump_time_index(file), ".txnindex": lambda: dump_txn_index(file),
               ".snapshot": lambda: dump_producer_snapshot(file)}
    if suffix not in dumpers:
        print(f"Ignoring unknown file {file}", file=sys.stderr)
        return
    print(f"Dumping {file}")
    dumpers[suffix]()


def dump_log(path: str, with_records: bool) -> int:
    files = [path]
    if os.path.isdir(path):
        files = sorted(os.path.join(path, n) for n in os.listdir(path)
                       if n.endswith(SUFFIXES) or n == QUORUM_STATE)
    for file in files:
        dump_file(file, with_records)
    return 0
