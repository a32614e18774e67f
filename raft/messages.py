"""The KRaft RPCs as plain data, as the pure core sends and receives them.

The edge maps these onto Kafka's wire messages (protocol/schemas/kraft.schema for Vote,
BeginQuorumEpoch and EndQuorumEpoch; produce_fetch.schema for Fetch). Field names mirror the
schema's partition-level fields; the topic/partition nesting, cluster id and directory ids
(KIP-853) are added by the edge. The sender of an inbound message is passed to the core beside
the message (``RaftCore.step(now_ms, source, message)``), as the connection would tell it.

| core class               | Kafka API (key)        | fields mirrored                                    |
|--------------------------|------------------------|----------------------------------------------------|
| VoteRequest              | Vote (52) v2           | replica_id, replica_epoch, last_offset_epoch,      |
|                          |                        | last_offset, pre_vote, voter_id                    |
| VoteResponse             | Vote (52) v2           | error_code, leader_id, leader_epoch, vote_granted  |
| BeginQuorumEpochRequest  | BeginQuorumEpoch (53)  | leader_id, leader_epoch, voter_id                  |
| EndQuorumEpochRequest    | EndQuorumEpoch (54)    | leader_id, leader_epoch, preferred_successors      |
| FetchRequest             | Fetch (1) v17+         | replica_id, current_leader_epoch, fetch_offset,    |
|                          |                        | last_fetched_epoch, high_watermark, max_wait_ms    |
| FetchResponse            | Fetch (1) v17+         | error_code, high_watermark, diverging_epoch,       |
|                          |                        | current_leader, records, snapshot_id, endpoints    |
| FetchSnapshotRequest     | FetchSnapshot (59)     | replica_id, current_leader_epoch, snapshot_id,     |
|                          |                        | position, max_bytes, replica_directory_id          |
| FetchSnapshotResponse    | FetchSnapshot (59)     | error_code, snapshot_id, size, position,           |
|                          |                        | unaligned_records, current_leader, endpoints       |
| AddVoterRequest          | AddRaftVoter (80)      | voter id, directory id, listeners, timeout_ms      |
| RemoveVoterRequest       | RemoveRaftVoter (81)   | voter_id, voter_directory_id                       |
| UpdateVoterRequest       | UpdateRaftVoter (82)   | current_leader_epoch, voter, kraft.version range   |
| VoterChangeResponse      | the three above        | error_code, error_message, current leader          |
| ApiVersionsProbe(+Resp.) | ApiVersions (18)       | the kraft.version SupportedFeature of a new voter  |

Directory ids (KIP-853) are carried where the wire has them: a Vote or BeginQuorumEpoch meant
for another directory id (a wiped disk) is refused with INVALID_VOTER_KEY, and a Fetch counts
toward the high watermark only if its replica key matches the voter's.

``VoteResponse.pre_vote`` and ``FetchResponse.fetch_offset``/``last_fetched_epoch`` are not on
the wire: the driver copies them from the request it answers (Kafka keeps the in-flight request
by correlation id), so a late standard-vote answer is never counted as a pre-vote grant, and a
duplicated or late Fetch answer is recognised as stale.
"""
from __future__ import annotations

from dataclasses import dataclass

from .log import Entry, OffsetAndEpoch
from .voters import Endpoint, Voter

# Kafka error codes used by the core (protocol/errors.py holds the full table).
NONE = 0
NOT_LEADER_OR_FOLLOWER = 6
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
REQUEST_TIMED_OUT = 7
INCONSISTENT_VOTER_SET = 94
INVALID_UPDATE_VERSION = 95
SNAPSHOT_NOT_FOUND = 98
POSITION_OUT_OF_RANGE = 99
INVALID_VOTER_KEY = 125
DUPLICATE_VOTER = 126
VOTER_NOT_FOUND = 127

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class VoteRequest:
    replica_id: int
    replica_epoch: int
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool
    voter_id: int
    replica_directory_id: bytes | None = None
    voter_directory_id: bytes | None = None


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error_code: int
    leader_id: int
    leader_epoch: int
    vote_granted: bool
    pre_vote: bool


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    leader_id: int
    leader_epoch: int
    voter_id: int
    voter_directory_id: bytes | None = None
    leader_endpoints: tuple[Endpoint, ...] = ()


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error_code: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error_code: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class FetchRequest:
    replica_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    high_watermark: int
    max_wait_ms: int
    replica_directory_id: bytes | None = None


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """Fetch's ``diverging_epoch``: the leader's log for ``epoch`` ends at ``end_offset``."""

    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error_code: int
    leader_id: int
    leader_epoch: int
    high_watermark: int
    diverging_epoch: EpochEndOffset | None
    records: tuple[Entry, ...]
    # Not on the wire: the driver copies them from the request it answers (its correlation id).
    fetch_offset: int
    last_fetched_epoch: int
    snapshot_id: OffsetAndEpoch | None = None  # fetch_offset is below the log start: fetch this
    leader_endpoints: tuple[Endpoint, ...] = ()


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    replica_id: int
    current_leader_epoch: int
    snapshot_id: OffsetAndEpoch
    position: int
    max_bytes: int
    replica_directory_id: bytes | None = None


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    error_code: int
    leader_id: int
    leader_epoch: int
    snapshot_id: OffsetAndEpoch
    size: int
    position: int
    data: bytes
    leader_endpoints: tuple[Endpoint, ...] = ()


# ---- KIP-853 voter changes. The source of these requests is an admin client (or a voter's
# own driver for UpdateVoter): ``step`` gets any non-int token as the source, and the answer
# goes back in ``Ready.messages`` addressed to that same token.

@dataclass(frozen=True, slots=True)
class AddVoterRequest:
    voter: Voter  # id, directory id, endpoints; the kraft.version range is probed
    timeout_ms: int
    ack_when_committed: bool = True


@dataclass(frozen=True, slots=True)
class RemoveVoterRequest:
    voter_id: int
    voter_directory_id: bytes | None


@dataclass(frozen=True, slots=True)
class UpdateVoterRequest:
    current_leader_epoch: int
    voter: Voter


@dataclass(frozen=True, slots=True)
class VoterChangeResponse:
    """The answer to AddVoter, RemoveVoter and UpdateVoter (UpdateVoter adds the leader)."""

    error_code: int
    error_message: str | None = None
    leader_id: int = NO_LEADER
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ApiVersionsProbe:
    """Leader -> driver: ask the replica at ``endpoints`` for its kraft.version range (ApiVersions).

    The driver steps the answer back as ``ApiVersionsProbeResponse`` with the replica id as source.
    """

    replica_id: int
    endpoints: tuple[Endpoint, ...]


@dataclass(frozen=True, slots=True)
class ApiVersionsProbeResponse:
    error_code: int
    min_kraft_version: int
    max_kraft_version: int


Message = (
    VoteRequest | VoteResponse | BeginQuorumEpochRequest | BeginQuorumEpochResponse
    | EndQuorumEpochRequest | EndQuorumEpochResponse | FetchRequest | FetchResponse
    | FetchSnapshotRequest | FetchSnapshotResponse | AddVoterRequest | RemoveVoterRequest
    | UpdateVoterRequest | VoterChangeResponse | ApiVersionsProbe | ApiVersionsProbeResponse
)
