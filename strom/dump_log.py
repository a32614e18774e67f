"""`strom dump-log`: print what a node's files hold, as kafka-dump-log.sh does, by file type:

    .log          the batches (``--records``/``--deep-iteration``: and their records; a
                  decoder or ``--print-data-log``: and each record's key and payload)
    .checkpoint   a metadata snapshot, read as a .log segment
    .index        ``offset: N position: P`` per entry
    .timeindex    ``timestamp: T offset: N`` per entry
    .txnindex     the aborted transactions (version, producerId, first, last and last stable offset)
    .snapshot     a producer state snapshot's producers
    quorum-state  the KRaft election state (JSON), as stored

A directory dumps each such file in it by name. An index's zero slots past its entries (a
sparse file's tail) end it, as Kafka's tool stops at the first entry that repeats the base offset.

``--cluster-metadata-decoder`` reads the metadata log (``__cluster_metadata-0``'s segments and
``.checkpoint`` snapshots): each record's payload is its metadata record as Kafka's
MetadataRecordSerde frames it, printed ``{"type":"TOPIC_RECORD","version":0,"data":{...}}``
with the record's fields as Kafka's JsonConverters write them (protocol/json_writer.py).
Control records print what kafka-dump-log prints for them at any time: ``endTxnMarker: COMMIT
coordinatorEpoch: N``, ``SnapshotHeader {...}``, ``SnapshotFooter {...}``, ``KRaftVersion {...}``,
``KRaftVoters {...}``, and ``controlType: LEADER_CHANGE(2)`` (Kafka's tool decodes no LeaderChange).
"""
from __future__ import annotations

import json
import os
import re
import struct
import sys
from typing import Any

_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_OFFSET_ENTRY = struct.Struct(">ii")  # relative offset, position
_TIME_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
_MARKER = struct.Struct(">hi")  # an end transaction marker's version, coordinatorEpoch
_VERSION = struct.Struct(">h")  # the leading version of a KRaft control record's value
_SNAPSHOT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot", ".checkpoint")
QUORUM_STATE = "quorum-state"
BOOTSTRAP_SNAPSHOT = "bootstrap.checkpoint"


def base_offset(path: str) -> int:
    name = os.path.basename(path).split(".", 1)[0]
    return int(name) if name.isdigit() else 0


class Options:
    """What to print of a segment's records, as kafka-dump-log's options choose it."""

    def __init__(self, deep_iteration: bool = False, print_data_log: bool = False,
                 cluster_metadata_decoder: bool = False, skip_record_metadata: bool = False) -> None:
        self.cluster_metadata_decoder = cluster_metadata_decoder
        self.print_data_log = print_data_log or cluster_metadata_decoder
        self.deep_iteration = deep_iteration or self.print_data_log
        self.skip_record_metadata = skip_record_metadata


_TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}
_HAS_DELETE_HORIZON = 0x40  # batch attributes bit 6 (KIP-534): baseTimestamp is the delete horizon
_CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
                  5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}
# Control records kafka-dump-log decodes: type -> (label, the value's message)
_CONTROL_VALUES = {3: ("SnapshotHeader", "SnapshotHeaderRecord"),
                   4: ("SnapshotFooter", "SnapshotFooterRecord"),
                   5: ("KRaftVersion", "KRaftVersionRecord"), 6: ("KRaftVoters", "VotersRecord")}


def metadata_record_type_name(message_name: str) -> str:
    """Kafka's MetadataRecordType constant for a record: ``TopicRecord`` -> ``TOPIC_RECORD``."""
    out: list[str] = []
    previous_upper = True
    for c in message_name:
        if c.isupper():
            if not previous_upper:
                out.append("_")
            previous_upper = True
        else:
            previous_upper = False
        out.append(c.upper())
    return "".join(out)


def metadata_payload(value: bytes | None, offset: int) -> str:
    """A metadata record's value as kafka-dump-log's cluster metadata parser prints it."""
    from protocol import messages
    from protocol.json_writer import to_json
    from protocol.metadata_records import decode_record

    try:
        if value is None:
            raise ValueError("the record has no value")
        record_type, version, record = decode_record(value)
        codec = messages.RECORDS[record_type]
        data = to_json(codec, version, record)
        name = json.dumps(metadata_record_type_name(codec.message.name))
        return f'{{"type":{name},"version":{version},"data":{data}}}'
    except Exception as e:  # noqa: BLE001 - Kafka's tool prints any failure and goes on
        return f"Error at {offset}, skipping. {e}"


def control_description(key: bytes | None, value: bytes | None) -> str:
    """What kafka-dump-log prints after a control record's metadata."""
    from engine.control import parse_control_type

    control_type = parse_control_type(key)
    if control_type in (0, 1):
        if value is None or len(value) < _MARKER.size:
            raise ValueError(f"end transaction marker of {0 if value is None else len(value)} bytes")
        _, coordinator_epoch = _MARKER.unpack_from(value)
        return f"endTxnMarker: {_CONTROL_TYPES[control_type]} coordinatorEpoch: {coordinator_epoch}"
    if control_type in _CONTROL_VALUES and value is not None:
        from protocol import messages
        from protocol.json_writer import to_json

        label, message = _CONTROL_VALUES[control_type]
        version = _VERSION.unpack_from(value)[0]
        codec = messages.DATA[message]
        return f"{label} {to_json(codec, version, codec.decode(version, value))}"
    return f"controlType: {_CONTROL_TYPES.get(control_type, 'UNKNOWN')}({control_type})"


def _record_sequence(base_sequence: int, offset_delta: int) -> int:
    if base_sequence < 0:
        return -1
    return (base_sequence + offset_delta) % (1 << 31)


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def dump_segment(file: str, options: Options) -> None:
    """A .log segment's (or .checkpoint snapshot's) batches, and with deep iteration their
    records, as kafka-dump-log prints them."""
    from ext.batch import decode_records, read_header, scan
    from ext.crc import crc32c

    name = os.path.basename(file)
    if name.endswith(".log"):
        print(f"Log starting offset: {base_offset(file)}")
    elif name == BOOTSTRAP_SNAPSHOT:
        print("KRaft bootstrap snapshot")
    elif (snapshot := _SNAPSHOT_NAME.match(name)) is not None:
        print(f"Snapshot end offset: {int(snapshot.group(1))}, epoch: {int(snapshot.group(2))}")
    with open(file, "rb") as f:
        data = f.read()
    position = 0
    while position < len(data):
        summary = scan(data, position, False, True)
        for rel in summary.positions:
            h = read_header(data, position + rel)
            crc_ok = crc32c(memoryview(data)[h.position + 21:h.position + h.size]) == h.crc
            timestamp_type = _TIMESTAMP_TYPES.get(h.timestamp_type, h.timestamp_type)
            horizon = (f"OptionalLong[{h.base_timestamp}]" if h.attributes & _HAS_DELETE_HORIZON
                       else "OptionalLong.empty")
            print(f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
                  f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} "
                  f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
                  f"partitionLeaderEpoch: {h.partition_leader_epoch} isTransactional: "
                  f"{str(h.is_transactional).lower()} isControl: {str(h.is_control).lower()} "
                  f"deleteHorizonMs: {horizon} "
                  f"position: {h.position} {timestamp_type}: {h.max_timestamp} size: {h.size} "
                  f"magic: {h.magic} compresscodec: {_CODECS.get(h.compression, h.compression)} "
                  f"crc: {h.crc} isvalid: {str(crc_ok).lower()}")
            if options.deep_iteration:
                for r in decode_records(data, h.position, False):
                    print(_record_line(h, r, timestamp_type, options))
        position += summary.valid_bytes
        if summary.error is not None:
            print(f"Found {len(data) - position} invalid bytes at position {position}: {summary.error}")
            break


def _record_line(h: Any, r: Any, timestamp_type: object, options: Options) -> str:
    line, prefix = "", "| "
    if not options.skip_record_metadata:
        line = (f"| offset: {r.offset} {timestamp_type}: {r.timestamp} "
                f"keySize: {-1 if r.key is None else len(r.key)} "
                f"valueSize: {-1 if r.value is None else len(r.value)} "
                f"sequence: {_record_sequence(h.base_sequence, r.offset - h.base_offset)} "
                f"headerKeys: [{','.join(k for k, _ in r.headers)}]")
        prefix = " "
        if h.is_control:
            line += " " + control_description(r.key, r.value)
    if options.print_data_log and not h.is_control:
        if options.cluster_metadata_decoder:
            line += f" payload: {metadata_payload(r.value, r.offset)}"
        else:
            if r.key is not None:
                line += f"{prefix}key: {_text(r.key)}"
            if r.value is not None:
                line += f" payload: {_text(r.value)}"
    return line


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


def dump_file(file: str, options: Options) -> None:
    name = os.path.basename(file)
    if name == QUORUM_STATE:
        print(f"Dumping {file}")
        dump_quorum_state(file)
        return
    suffix = os.path.splitext(name)[1]
    dumpers = {".log": lambda: dump_segment(file, options),
               ".checkpoint": lambda: dump_segment(file, options),
               ".index": lambda: dump_index(file), ".timeindex": lambda: dump_time_index(file),
               ".txnindex": lambda: dump_txn_index(file), ".snapshot": lambda: dump_producer_snapshot(file)}
    if suffix not in dumpers:
        print(f"Ignoring unknown file {file}", file=sys.stderr)
        return
    print(f"Dumping {file}")
    dumpers[suffix]()


def dump_log(paths: list[str], options: Options) -> int:
    """Dump each file of ``paths`` (a directory: each file in it that kafka-dump-log reads)."""
    for path in paths:
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: no such file or directory")
        files = [path]
        if os.path.isdir(path):
            files = sorted(os.path.join(path, n) for n in os.listdir(path)
                           if n.endswith(SUFFIXES) or n == QUORUM_STATE)
        for file in files:
            dump_file(file, options)
    return 0


EPILOG = """examples:
  strom dump-log /var/lib/strom/orders-0/00000000000000000000.log --print-data-log
  strom dump-log --cluster-metadata-decoder --files /data/__cluster_metadata-0/00000000000000000000.log
  strom dump-log --cluster-metadata-decoder /var/lib/strom/__cluster_metadata-0"""


def add_parser(sub: Any) -> None:
    import argparse

    dump = sub.add_parser(
        "dump-log", help="print a segment, snapshot, index, producer snapshot or quorum-state file",
        description="Print what a node's log files hold, as kafka-dump-log does: segments and metadata "
                    "snapshots (.log, .checkpoint), .index, .timeindex, .txnindex, producer snapshots "
                    "(.snapshot) and quorum-state; a directory dumps each such file in it.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    dump.add_argument("path", nargs="*", help="files or partition directories to dump")
    dump.add_argument("--files", help="comma separated files to dump (kafka-dump-log's form)")
    dump.add_argument("--records", "--deep-iteration", dest="deep_iteration", action="store_true",
                      help="print every record of each batch too")
    dump.add_argument("--print-data-log", action="store_true",
                      help="print each record's key and payload (implies --deep-iteration)")
    dump.add_argument("--cluster-metadata-decoder", action="store_true",
                      help="decode the payloads as the metadata log's records (implies --print-data-log)")
    dump.add_argument("--skip-record-metadata", action="store_true",
                      help="print only the key and payload of each record")


def run(args: Any) -> int:
    paths = list(args.path) + ([f for f in args.files.split(",") if f] if args.files else [])
    if not paths:
        print("strom dump-log: a file or directory to dump is required (PATH or --files)", file=sys.stderr)
        return 1
    return dump_log(paths, Options(args.deep_iteration, args.print_data_log, args.cluster_metadata_decoder,
                                   args.skip_record_metadata))
