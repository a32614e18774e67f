"""The leader's view of one follower: its offsets as of its last Fetch, and whether it is caught up.

Theory of operation. Every follower Fetch the leader serves updates the follower's ReplicaState
(``Replica.update_fetch_state``); the high watermark, ISR expansion and ISR shrink all read it.
"Caught up" is decided by ``last_caught_up_time_ms`` with the two-tier rule:

* the fetch reached the leader's log end offset as of now   -> caught up now;
* else it reached the leader's log end offset as of the previous fetch -> caught up at the
  previous fetch's time (a follower that keeps closing the gap of its last request stays in
  sync although it trails a busy leader by a few records);
* else unchanged.

A follower is caught up while its LEO equals the leader's or ``now - last_caught_up_time_ms <=
replica.lag.time.max.ms``; the ISR shrink drops exactly the followers for which this is false.

ReplicaState (immutable; replaced on every update):

| field                            | meaning                                                          |
|----------------------------------|------------------------------------------------------------------|
| log_start_offset                 | follower's log start offset from its Fetch; -1 unknown           |
| log_end_offset                   | follower's LEO = its fetch offset; -1 unknown (new leader)       |
| last_fetch_leader_log_end_offset | leader's LEO when the last Fetch was read; only grows until reset|
| last_fetch_time_ms               | when the last Fetch arrived                                      |
| last_caught_up_time_ms           | latest t with fetch offset >= the leader's LEO at t; only grows  |
| broker_epoch                     | broker epoch carried by the last Fetch; None before the first    |
"""
from __future__ import annotations

from typing import NamedTuple

from replication.errors import StaleBrokerEpoch

__all__ = ["Replica", "ReplicaState", "StaleBrokerEpoch"]


class ReplicaState(NamedTuple):
    log_start_offset: int = -1
    log_end_offset: int = -1
    last_fetch_leader_log_end_offset: int = -1
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0
    broker_epoch: int | None = None

    def is_caught_up(self, leader_end_offset: int, now_ms: int, replica_max_lag_ms: int) -> bool:
        return (leader_end_offset == self.log_end_offset
                or now_ms - self.last_caught_up_time_ms <= replica_max_lag_ms)


class Replica:
    __slots__ = ("broker_id", "state")

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.state = ReplicaState()

    def update_fetch_state(self, fetch_offset: int, log_start_offset: int, now_ms: int,
                           leader_end_offset: int, broker_epoch: int,
                           registered_epoch: int | None) -> None:
        """Record a Fetch read from ``fetch_offset`` when the leader's LEO was ``leader_end_offset``.

        ``broker_epoch`` is the one in the Fetch (-1: not sent); ``registered_epoch`` the metadata
        image's epoch of this broker (None: unknown). A fetch from an older incarnation of the
        broker raises StaleBrokerEpoch and changes nothing.
        """
        if broker_epoch != -1 and registered_epoch is not None and registered_epoch > broker_epoch:
            raise StaleBrokerEpoch(
                f"replica {self.broker_id}: fetch with broker epoch {broker_epoch}, "
                f"registered {registered_epoch}")
        current = self.state
        if fetch_offset >= leader_end_offset:
            caught_up = max(current.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= current.last_fetch_leader_log_end_offset:
            caught_up = max(current.last_caught_up_time_ms, current.last_fetch_time_ms)
        else:
            caught_up = current.last_caught_up_time_ms
        self.state = ReplicaState(
            log_start_offset=log_start_offset,
            log_end_offset=fetch_offset,
            last_fetch_leader_log_end_offset=max(leader_end_offset, current.last_fetch_leader_log_end_offset),
            last_fetch_time_ms=now_ms,
            last_caught_up_time_ms=caught_up,
            broker_epoch=broker_epoch,
        )

    def reset(self, now_ms: int, leader_end_offset: int, is_new_leader: bool,
              is_follower_in_sync: bool) -> None:
        """Reinitialise on a new leader epoch (makeLeader).

        An ISR member counts as caught up now; anyone else as never, so it does not hold the
        high watermark back. A new leader forgets what an older leadership learned; a
        re-elected leader keeps the offsets but not the fetch time of non-ISR followers, so they
        cannot rejoin before they fetch again.
        """
        caught_up = now_ms if is_follower_in_sync else 0
        if is_new_leader:
            self.state = ReplicaState(last_caught_up_time_ms=caught_up)
        else:
            current = self.state
            self.state = ReplicaState(
                log_start_offset=current.log_start_offset,
                log_end_offset=current.log_end_offset,
                last_fetch_leader_log_end_offset=leader_end_offset,
                last_fetch_time_ms=now_ms if is_follower_in_sync else 0,
                last_caught_up_time_ms=caught_up,
                broker_epoch=current.broker_epoch,
            )

    def __repr__(self) -> str:
        return f"Replica({self.broker_id}, {self.state})"
