"""The follower's side of replication: where to fetch from, when and where to truncate, and
applying what the leader sent.

Theory of operation. A follower fetches from its log end offset with the epoch of its last
record (``last_fetched_epoch``); the leader either sends records or, when that epoch ended earlier
in its own log than our fetch offset, a diverging epoch (epoch, end offset) and no records. The
follower then truncates to where its log and the leader's last agree (``truncation_offset``,
Kafka's getOffsetTruncationState) and fetches again; when the leader's epoch is unknown to us the
truncation is only intermediate and the next fetch may diverge again (several rounds, KIP-279).
An OffsetsForLeaderEpoch answer is handled by the same rule. A follower whose epoch cache is empty
truncates to its high watermark and fetches from there.

Offset out of range: if the leader's LEO is below ours (an unclean election) we truncate to it;
if the leader's log start passed our LEO (we were away while it deleted) we truncate fully and
start at the leader's log start; otherwise we keep our log and fetch from max(LEO, leader start).

On records: HW = max(HW, min(leader HW, LEO)) (a follower's HW never moves back), and the log
start offset follows the leader's once it is within our HW.

PartitionFetchState:

| field               | meaning                                                               |
|---------------------|-----------------------------------------------------------------------|
| fetch_offset        | next offset to fetch = the local LEO once truncation is done          |
| last_fetched_epoch  | epoch of the last local record (-1: none), sent for the divergence check |
| current_leader_epoch| the leader epoch this fetcher follows; sent for fencing               |
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from replication.errors import UnexpectedAppendOffset
from replication.log import PartitionLog


@dataclass(frozen=True)
class PartitionFetchState:
    fetch_offset: int
    last_fetched_epoch: int
    current_leader_epoch: int


def initial_fetch_offset(log: PartitionLog) -> int:
    """Kafka's ReplicaManager.initialFetchOffset: the LEO when the epoch cache knows anything
    (the fetch path's divergence check trims an uncommitted tail), else the HW."""
    return log.log_end_offset if log.latest_epoch >= 0 else log.high_watermark


def initial_fetch_state(log: PartitionLog, current_leader_epoch: int) -> PartitionFetchState:
    if log.latest_epoch >= 0:
        return PartitionFetchState(log.log_end_offset, log.latest_epoch, current_leader_epoch)
    # No epoch information: nothing above the HW can be checked, so it goes.
    log.truncate_to(log.high_watermark)
    return PartitionFetchState(log.log_end_offset, log.latest_epoch, current_leader_epoch)


def truncation_offset(log: PartitionLog, leader_epoch: int, leader_end_offset: int,
                      fetch_offset: int | None = None) -> tuple[int, bool]:
    """Where to truncate given the leader's (epoch, end offset); (offset, truncation completed).

    * end offset unknown (-1): the current fetch offset (the HW for a follower with no epochs);
    * epoch unknown (-1): the leader's end offset, capped by our LEO;
    * the leader's epoch unknown to us: the end of our largest earlier epoch, not completed
      (the next fetch checks again with that epoch);
    * else min(our end of that epoch, the leader's end offset, our LEO).
    """
    leo = log.log_end_offset
    if leader_end_offset == -1:
        return (log.high_watermark if fetch_offset is None else fetch_offset), True
    if leader_epoch == -1:
        return min(leader_end_offset, leo), True
    epoch, end_offset = log.end_offset_for_epoch(leader_epoch)
    if end_offset == -1:
        # We tracked no epoch that early; the leader's offset is the only guide.
        return min(leader_end_offset, leo), True
    if epoch != leader_epoch:
        return min(end_offset, leo), False
    return min(end_offset, leader_end_offset, leo), True


def handle_diverging_epoch(log: PartitionLog, state: PartitionFetchState, epoch: int,
                           end_offset: int) -> PartitionFetchState:
    """A diverging epoch in a Fetch response, or an OffsetsForLeaderEpoch answer: truncate and
    fetch from the truncation point with our (new) latest epoch."""
    offset, _completed = truncation_offset(log, epoch, end_offset, state.fetch_offset)
    log.truncate_to(offset)
    return replace(state, fetch_offset=offset, last_fetched_epoch=log.latest_epoch)


def handle_offset_out_of_range(log: PartitionLog, state: PartitionFetchState, leader_log_start: int,
                               leader_log_end: int) -> PartitionFetchState:
    leo = log.log_end_offset
    if leader_log_end < leo:
        # Unclean election: the new leader has less than we do.
        log.truncate_to(leader_log_end)
        return replace(state, fetch_offset=leader_log_end, last_fetched_epoch=log.latest_epoch)
    if leader_log_start > leo:
        # Everything we hold is older than what the leader still has.
        log.truncate_fully_and_start_at(leader_log_start)
    return replace(state, fetch_offset=max(leader_log_start, leo), last_fetched_epoch=log.latest_epoch)


def handle_records(log: PartitionLog, state: PartitionFetchState, records: Any, leader_hw: int,
                   leader_log_start: int, now_ms: int) -> tuple[PartitionFetchState, Any]:
    """Append the leader's records at our LEO; move the HW and log start offset after them."""
    if state.fetch_offset != log.log_end_offset:
        raise ValueError(f"fetch offset {state.fetch_offset} is not the log end offset {log.log_end_offset}")
    try:
        info = log.append_as_follower(records, now_ms)
    except UnexpectedAppendOffset as e:
        # The leader's log start fell inside the first batch (DeleteRecords): restart our log
        # at the batch's base offset, as this is the first thing we append.
        leo = log.log_end_offset
        if not (leo == log.log_start_offset and e.first_offset < leo <= e.last_offset):
            raise
        log.truncate_fully_and_start_at(e.first_offset)
        info = log.append_as_follower(records, now_ms)
    log.maybe_increment_high_watermark(min(leader_hw, log.log_end_offset))
    if log.log_start_offset < leader_log_start <= log.high_watermark:
        log.maybe_increment_log_start_offset(leader_log_start)
    appended = info.last_offset >= info.first_offset
    return PartitionFetchState(
        fetch_offset=log.log_end_offset,
        last_fetched_epoch=log.latest_epoch if appended else state.last_fetched_epoch,
        current_leader_epoch=state.current_leader_epoch,
    ), info
