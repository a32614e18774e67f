"""Offsets retention: which committed offsets of a group have expired (offsets.retention.minutes).

Since Kafka 2.1 (KIP-211) an offset does not expire by its commit time alone: while a
consumer is using a group, its offsets stay. What counts, per group (Kafka's
``offsetExpirationCondition`` and ``isSubscribedToTopic`` of each group type):

| group                                   | offsets that may expire      | retention counted from      |
|-----------------------------------------|------------------------------|-----------------------------|
| classic, protocol type set, Empty       | all                          | when it became Empty (its   |
|                                         |                              | currentStateTimestamp; the  |
|                                         |                              | commit time if a record     |
|                                         |                              | older than v2 had none)     |
| classic "consumer", Stable, its members'| of topics no member          | the commit time (KIP-496)   |
| subscriptions readable                  | subscribes to                |                             |
| classic, any other state or type        | none                         |                             |
| classic without a protocol type (the    | all                          | the commit time             |
| standalone commits of assign())         |                              |                             |
| consumer group (KIP-848), any state     | of topics no member          | the commit time             |
|                                         | subscribes to (all once      |                             |
|                                         | Empty)                       |                             |

An offset committed with an explicit expire timestamp (OffsetCommit v2-v4's
retention_time_ms, stored in OffsetCommitValue v1) expires at that timestamp instead, where
its group's row lets anything expire at all. An offset whose newer commit is written but not
committed yet (``pending``) never expires: its tombstone would follow that commit in the log
and delete it (Kafka's pending offset commits). A group all of whose offsets expired, or that
has none, is left for the coordinator to delete if it is Empty.

Pure: the coordinator's ``cleanup_group_metadata`` applies this at the time it is given and
writes the tombstones.
"""
from __future__ import annotations

import struct
from collections.abc import Callable, Collection
from typing import cast

from broker.groups import storage
from broker.groups.consumer_group import PROTOCOL_TYPE, ConsumerGroup
from broker.groups.group import EMPTY, STABLE, ClassicGroup
from protocol import messages as M
from protocol.types import Reader

TopicPartition = tuple[str, int]
Group = ClassicGroup | ConsumerGroup
# When an offset's retention starts (``_base_timestamp`` is None while none of a group's may expire).
BaseTimestamp = Callable[[storage.OffsetAndMetadata], int]


def expired_offsets(group: Group, offsets: dict[TopicPartition, storage.OffsetAndMetadata],
                    pending: Collection[TopicPartition], now_ms: int,
                    retention_ms: int) -> tuple[list[TopicPartition], bool]:
    """(the group's offsets expired at ``now_ms``, in order; whether none are left after them,
    counting ``pending`` commits as offsets that stay)."""
    if not offsets and not pending:
        return [], True
    base = _base_timestamp(group)
    if base is None:
        return [], False
    subscribed = subscription(group)
    expired = [tp for tp, om in sorted(offsets.items())
               if tp not in pending and not subscribed(tp[0]) and _is_expired(om, base, now_ms, retention_ms)]
    return expired, len(expired) == len(offsets) and not pending


def _is_expired(om: storage.OffsetAndMetadata, base: BaseTimestamp, now_ms: int, retention_ms: int) -> bool:
    if om.expire_timestamp >= 0:
        return now_ms >= om.expire_timestamp
    return now_ms - base(om) >= retention_ms


def _base_timestamp(group: Group) -> BaseTimestamp | None:
    def commit_time(om: storage.OffsetAndMetadata) -> int:
        return om.commit_timestamp

    if isinstance(group, ConsumerGroup) or not group.protocol_type:
        return commit_time
    if group.state == EMPTY:
        emptied = group.state_timestamp
        return commit_time if emptied < 0 else lambda om: emptied
    if group.state == STABLE and subscribed_topics(group) is not None:  # a "consumer" group
        return commit_time
    return None


def subscription(group: Group) -> Callable[[str], bool]:
    """Whether a topic's offsets are in use: a member subscribes to it (Kafka's
    ``isSubscribedToTopic``, which OffsetDelete asks too). A classic group whose
    subscriptions cannot be read counts as subscribed to all if it uses the consumer protocol."""
    if isinstance(group, ConsumerGroup):
        members = list(group.members.values())
        return lambda topic: any(m.subscribes(topic) for m in members)
    topics = subscribed_topics(group)
    if topics is None:
        uses_consumer_protocol = group.protocol_type == PROTOCOL_TYPE
        return lambda topic: uses_consumer_protocol
    return topics.__contains__


def subscribed_topics(group: ClassicGroup) -> set[str] | None:
    """The topics a classic "consumer" group's members subscribe to, read from their
    JoinGroup metadata for the chosen protocol (ConsumerProtocolSubscription, whose v0 fields
    prefix every version); None if the group is of another type, has no protocol yet, or a
    subscription does not parse."""
    if group.protocol_type != PROTOCOL_TYPE:
        return None
    if not group.members:
        return set()
    if group.protocol_name is None:
        return None
    codec = M.DATA["ConsumerProtocolSubscription"]
    topics: set[str] = set()
    for member in group.members.values():
        data = member.metadata(group.protocol_name)
        try:
            subscription = cast(M.ConsumerProtocolSubscription, codec.decode(0, Reader(memoryview(data)[2:])))
            topics.update(subscription.topics or ())
        except (ValueError, IndexError, EOFError, struct.error):
            return None
    return topics
