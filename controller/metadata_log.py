"""The metadata log ``__cluster_metadata-0`` of a single-voter quorum.

The degenerate KRaft quorum: its only voter becomes leader at startup (epoch + 1, a
LeaderChange control record first) and commits on append, so the high watermark is the
log end offset once the append is fsynced. Observers (brokers) read it with Fetch, long
polling until something is appended. The full quorum (raft/) replaces this class.

quorum-state (JSON, temp file + fsync + rename)::

    {"clusterId":"","leaderId":1,"leaderEpoch":4,"votedId":-1,"appliedOffset":0,
     "currentVoters":[{"voterId":1}],"data_version":0}
"""
from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from typing import Any

from engine.checkpoint import write_atomically
from engine.config import LogConfig
from engine.log import ORIGIN_RAFT_LEADER, Log
from engine.reader import PartitionReader
from ext.batch import build_batch, decode_records
from protocol import messages
from protocol.metadata_records import CONTROL_LEADER_CHANGE, control_key, decode_record, encode_record

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = (1).to_bytes(16, "big")
QUORUM_STATE = "quorum-state"


class SingleVoterLog:
    def __init__(self, metadata_dir: str, node_id: int, cluster_id: str):
        self.node_id = node_id
        self.dir = os.path.join(metadata_dir, f"{METADATA_TOPIC}-0")
        self.log = Log(self.dir, LogConfig(segment_bytes=1 << 30, retention_ms=-1),
                       had_clean_shutdown=False)
        self.epoch = self._read_epoch() + 1
        write_atomically(os.path.join(self.dir, QUORUM_STATE), json.dumps({
            "clusterId": cluster_id, "leaderId": node_id, "leaderEpoch": self.epoch, "votedId": node_id,
            "appliedOffset": 0, "currentVoters": [{"voterId": node_id}], "data_version": 0,
        }).encode())
        self._appended = asyncio.Event()
        change = messages.LeaderChangeMessage(
            version=0, leader_id=node_id,
            voters=[messages.LeaderChangeMessage.Voter(voter_id=node_id)],
            granting_voters=[messages.LeaderChangeMessage.Voter(voter_id=node_id)],
        )
        value = messages.DATA["LeaderChangeMessage"].encode(0, change)
        self._append_batch(build_batch([(control_key(CONTROL_LEADER_CHANGE), value, [], _now())],
                                       is_control=True))

    def _read_epoch(self) -> int:
        try:
            with open(os.path.join(self.dir, QUORUM_STATE)) as f:
                return int(json.load(f).get("leaderEpoch", 0))
        except FileNotFoundError:
            return max(self.log.latest_epoch, 0)
        except (ValueError, json.JSONDecodeError) as e:
            path = os.path.join(self.dir, QUORUM_STATE)
            raise ValueError(f"{path}: unreadable quorum state: {e}") from None

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def _append_batch(self, batch: bytes) -> int:
        info = self.log.append_as_leader(bytearray(batch), self.epoch, origin=ORIGIN_RAFT_LEADER)
        self.log.flush()
        self.log.update_high_watermark(self.log.log_end_offset)
        self._appended.set()
        self._appended = asyncio.Event()
        return info.last_offset

    def append(self, records: list[Any]) -> int:
        """Append records as one batch and commit them. Returns the last offset."""
        now = _now()
        return self._append_batch(build_batch([(None, encode_record(r), [], now) for r in records]))

    async def wait_for_append(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(self._appended.wait(), timeout)
        except TimeoutError:
            pass

    def records(self) -> Iterator[tuple[int, Any]]:
        """Every committed metadata record from the start: (offset, record)."""
        for header, data in PartitionReader(self.dir).batches(0, self.high_watermark):
            if header.is_control:
                continue
            for record in decode_records(data):
                yield record.offset, decode_record(record.value)[2]

    def close(self) -> None:
        self.log.close()


def _now() -> int:
    return int(time.time() * 1000)
