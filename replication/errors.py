"""Error codes and exceptions of the replication core.

The core speaks Kafka's error codes as plain ints so it needs no protocol import; the edge
maps them onto the wire unchanged.

| name                              | code | where the core produces it                                   |
|-----------------------------------|------|--------------------------------------------------------------|
| NONE                              |    0 |                                                              |
| UNKNOWN_SERVER_ERROR              |   -1 | AlterPartition answers: retried                              |
| OFFSET_OUT_OF_RANGE               |    1 | follower fetch outside [log start offset, log end offset]    |
| UNKNOWN_TOPIC_OR_PARTITION        |    3 | AlterPartition answer: give up, wait for metadata            |
| NOT_LEADER_OR_FOLLOWER            |    6 | produce / follower fetch on a replica that is not the leader |
| REQUEST_TIMED_OUT                 |    7 | acks=all waiter expired (edge)                               |
| NOT_ENOUGH_REPLICAS               |   19 | acks=all write while the ISR is under min ISR                |
| NOT_ENOUGH_REPLICAS_AFTER_APPEND  |   20 | acks=all completed while the maximal ISR is under min ISR    |
| NOT_CONTROLLER                    |   41 | AlterPartition answer: retried                               |
| INVALID_REQUEST                   |   42 | AlterPartition answer: give up, wait for metadata (Kafka)    |
| OPERATION_NOT_ATTEMPTED           |   55 | AlterPartition answer: reset to the last committed state     |
| FENCED_LEADER_EPOCH               |   74 | request epoch older than ours; AlterPartition: give up       |
| UNKNOWN_LEADER_EPOCH              |   75 | request epoch newer than ours                                |
| STALE_BROKER_EPOCH                |   77 | (controller side); a stale follower fetch is answered with   |
|                                   |      | NOT_LEADER_OR_FOLLOWER, as Kafka does (StaleBrokerEpoch)     |
| INVALID_UPDATE_VERSION            |   95 | AlterPartition answer: give up, wait for metadata            |
| NEW_LEADER_ELECTED                |  108 | AlterPartition answer: give up, wait for metadata            |
| INELIGIBLE_REPLICA                |  107 | AlterPartition answer: reset to the last committed state     |
"""
from __future__ import annotations

NONE = 0
UNKNOWN_SERVER_ERROR = -1
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
NOT_ENOUGH_REPLICAS = 19
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
NOT_CONTROLLER = 41
INVALID_REQUEST = 42
OPERATION_NOT_ATTEMPTED = 55
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
STALE_BROKER_EPOCH = 77
INVALID_UPDATE_VERSION = 95
NEW_LEADER_ELECTED = 108
INELIGIBLE_REPLICA = 107

NAMES = {
    value: name for name, value in dict(globals()).items()
    if name.isupper() and isinstance(value, int)
}


class ReplicationError(Exception):
    """An error the core raises with the Kafka code the edge answers with."""

    code = UNKNOWN_SERVER_ERROR


class NotLeaderOrFollower(ReplicationError):
    code = NOT_LEADER_OR_FOLLOWER


class NotEnoughReplicas(ReplicationError):
    """acks=all reached a leader whose ISR is under the effective min ISR (nothing written)."""

    code = NOT_ENOUGH_REPLICAS


class FencedLeaderEpoch(ReplicationError):
    code = FENCED_LEADER_EPOCH


class UnknownLeaderEpoch(ReplicationError):
    code = UNKNOWN_LEADER_EPOCH


class OffsetOutOfRange(ReplicationError):
    code = OFFSET_OUT_OF_RANGE


class StaleBrokerEpoch(NotLeaderOrFollower):
    """A follower fetch carried an older broker epoch than the metadata image's (a rebooted
    broker's late request): its fetch state update is fenced. Kafka answers
    NOT_LEADER_OR_FOLLOWER, so the code is that one."""


class UnexpectedAppendOffset(ReplicationError):
    """A follower append whose first offset is not the log end offset."""

    def __init__(self, first_offset: int, last_offset: int, log_end_offset: int) -> None:
        super().__init__(f"append of [{first_offset}, {last_offset}] at log end offset {log_end_offset}")
        self.first_offset = first_offset
        self.last_offset = last_offset
