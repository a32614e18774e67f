"""Transactions seen from the files alone: a partition's last stable offset, the aborted
transactions of a range, and which batches of a read are aborted.

Last stable offset (what a read_committed Kafka consumer may read up to): the least first
offset of a transaction still open at the checkpointed high watermark, else the high
watermark. The broker's producer state is not in the files as it stands, so it is rebuilt
as the broker rebuilds it after a restart: the newest producer snapshot
``<offset>.snapshot`` at or below the high watermark (read by engine/producer_state.py; its
entries name each producer's open transaction's first offset), then the batch headers from
the snapshot's offset to the high watermark (engine/reader.py's chunk iterator over
ext.batch.scan), where a transactional data batch opens its producer's transaction when
none is open and a marker (engine/control.py) ends it. No snapshot usable: from the first
segment with no transaction open. The answer is at least the log start offset. Only
headers are read, and a marker's one record.

Aborted transactions (Kafka's collectAbortedTransactions): the entries of the segments'
``.txnindex`` files whose ABORT marker is at or after the range's start and whose first
offset is below its end, from the segment holding the start on until a segment's search is
complete (engine/txn_index.py).

Which batches are aborted (Kafka's consumer, CompletedFetch): walking the batches in offset
order, the aborted transactions whose first offset is at or below a producer batch's last
offset are taken in (their producer becomes aborted); an ABORT marker of an aborted
producer ends it; a transactional data batch of an aborted producer is skipped whole.
"""
from __future__ import annotations

import heapq
import os
from collections.abc import Iterable

from engine.control import CONTROL_ABORT
from engine.errors import InvalidIndexError
from engine.producer_state import (
    SNAPSHOT_SUFFIX,
    CorruptSnapshotError,
    ProducerStateManager,
    marker_of,
)
from engine.reader import PartitionReader, base_offset_of, iter_file_chunks, search_for_offset
from engine.txn_index import TXN_INDEX_SUFFIX, AbortedTxn, collect_aborted, read_aborted_txns
from ext.errors import CorruptRecordError
from spark.errors import StromSparkError

_CONTROL = 0x20  # batch attributes: a control batch
_TRANSACTIONAL = 0x10  # batch attributes: part of a transaction
_SNAPSHOT_NAME_LENGTH = 20 + len(SNAPSHOT_SUFFIX)


def snapshot_offsets(partition_dir: str) -> list[int]:
    """The offsets of the producer snapshots in a partition directory, ascending."""
    try:
        names = os.listdir(partition_dir)
    except FileNotFoundError:
        return []
    return sorted(base_offset_of(n) for n in names
                  if n.endswith(SNAPSHOT_SUFFIX) and len(n) == _SNAPSHOT_NAME_LENGTH and n[:20].isdigit())


def last_stable_offset(reader: PartitionReader, log_start_offset: int, high_watermark: int) -> int:
    """The partition's last stable offset at ``high_watermark``, in [log start, HW]."""
    if high_watermark <= log_start_offset or not reader.base_offsets:
        return high_watermark
    ongoing, start = _state_at_snapshot(reader, high_watermark)
    for base_offset, producer_id, attributes, is_abort in _producer_batches(reader, start, high_watermark):
        if attributes & _CONTROL:
            if is_abort is not None:  # a marker, COMMIT or ABORT
                ongoing.pop(producer_id, None)
        elif attributes & _TRANSACTIONAL and producer_id not in ongoing:
            ongoing[producer_id] = base_offset
    first = min(ongoing.values(), default=high_watermark)
    return max(log_start_offset, min(first, high_watermark))


def _state_at_snapshot(reader: PartitionReader, high_watermark: int) -> tuple[dict[int, int], int]:
    """(producer id -> open transaction's first offset, the offset they hold at) from the
    newest readable snapshot within [first segment, HW], else ({}, the first segment's
    base offset). Below the log start too: DeleteRecords may pass an open transaction's
    first offset (it is bounded by the high watermark), and that transaction still holds
    the LSO, at the log start."""
    first_base = reader.base_offsets[0]
    for offset in reversed(snapshot_offsets(reader.dir)):
        if offset > high_watermark or offset < first_base:
            continue
        try:
            with open(os.path.join(reader.dir, f"{offset:020d}{SNAPSHOT_SUFFIX}"), "rb") as f:
                data = f.read()
            state = ProducerStateManager()
            state.load_snapshot(data)
        except (FileNotFoundError, CorruptSnapshotError):
            continue
        return dict(state.ongoing), offset
    return {}, first_base


def _producer_batches(reader: PartitionReader, start: int,
                      end: int) -> Iterable[tuple[int, int, int, bool | None]]:
    """(base offset, producer id, attributes, is an ABORT marker or None when the batch
    holds no marker) of each producer batch whose base offset is in [start, end)."""
    for i in range(reader.segment_for(start), len(reader.base_offsets)):
        base = reader.base_offsets[i]
        if base >= end:
            return
        path = reader.segment_path(base)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue  # deleted by retention since the listing: below the log start now
        try:
            position = 0
            if start > base:
                found = search_for_offset(fd, start, reader.start_position(i, start), reader.sizes[i])
                if found is None:
                    continue
                position = found.position
            for _, chunk, summary in iter_file_chunks(fd, position, reader.sizes[i]):
                for pos, base_offset, pid, attributes in zip(
                    summary.positions, summary.base_offsets, summary.producer_ids, summary.attributes,
                ):
                    if base_offset >= end:
                        return
                    if pid < 0 or base_offset < start:
                        continue
                    is_abort = None
                    if attributes & _CONTROL:
                        marker = marker_of(chunk, pos)
                        if marker is not None:
                            is_abort = marker.marker.control_type == CONTROL_ABORT
                    yield base_offset, pid, attributes, is_abort
        except CorruptRecordError as e:
            raise StromSparkError(f"corrupt segment {path}: {e} (reading the batch headers up to "
                                  f"the high watermark for the last stable offset)") from None
        finally:
            os.close(fd)


def aborted_transactions(reader: PartitionReader, start: int, end: int) -> list[AbortedTxn]:
    """The aborted transactions overlapping [start, end), from the segments' .txnindex."""
    aborted: list[AbortedTxn] = []
    if start >= end:
        return aborted
    for base in reader.base_offsets[reader.segment_for(start):]:
        try:
            entries = read_aborted_txns(reader.segment_path(base, TXN_INDEX_SUFFIX))
        except InvalidIndexError as e:
            raise StromSparkError(f"corrupt transaction index: {e}") from None
        found = collect_aborted(entries, start, end)
        aborted.extend(found.aborted)
        if found.is_complete:
            break
    return aborted


class AbortedFilter:
    """Kafka's consumer rule over the batches of one read, in offset order (state carries
    from one chunk to the next). ``aborted``: (producer id, first offset) pairs."""

    def __init__(self, aborted: Iterable[tuple[int, int]]):
        self._pending = [(first, pid) for pid, first in aborted]
        heapq.heapify(self._pending)
        self._aborting: set[int] = set()

    def skip(self, chunk, summary) -> list[bool]:
        """For each batch of ``summary`` (a scan of ``chunk``): whether it is aborted data."""
        out = []
        pending, aborting = self._pending, self._aborting
        for pos, pid, attributes, last in zip(summary.positions, summary.producer_ids,
                                              summary.attributes, summary.last_offsets):
            if pid < 0:
                out.append(False)
                continue
            while pending and pending[0][0] <= last:
                aborting.add(heapq.heappop(pending)[1])
            if attributes & _CONTROL:
                if pid in aborting:
                    marker = marker_of(chunk, pos)
                    if marker is not None and marker.marker.control_type == CONTROL_ABORT:
                        aborting.discard(pid)
                out.append(False)  # control batches are never rows anyway
                continue
            out.append(bool(attributes & _TRANSACTIONAL) and pid in aborting)
        return out
