"""ListOffsets' special values (Kafka's ListOffsetsRequest): timestamps that name a position
rather than a time, and the replica ids a request may come from; a client's request."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from protocol import messages as M

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
CONSUMER_REPLICA_ID = -1  # a client: sees up to the high watermark, from the leader only
DEBUGGING_REPLICA_ID = -2  # a tool (or the controller's balanced recovery): any replica answers


def offsets_request(topics: Mapping[str, Sequence[int]], timestamp: int = -1,
                    isolation_level: int = 0) -> M.ListOffsetsRequest:
    """A client's ListOffsets for each topic's partitions at ``timestamp`` (LATEST by default, or a
    time or another special value), with no leader epoch to check."""
    T = M.ListOffsetsRequest.ListOffsetsTopic
    return M.ListOffsetsRequest(replica_id=CONSUMER_REPLICA_ID, isolation_level=isolation_level, topics=[
        T(name=topic, partitions=[T.ListOffsetsPartition(partition_index=i, current_leader_epoch=-1,
                                                         timestamp=timestamp) for i in ids])
        for topic, ids in topics.items()])
