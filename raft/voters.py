"""Voter sets (KIP-853): who votes, how to reach them, which kraft.version they support.

A voter is a replica key (replica id + directory id) with its listener endpoints and the range
of kraft.version it supports. With kraft.version 0 the set comes from the static
``controller.quorum.voters`` and carries no directory ids (``None``); with kraft.version 1 it
lives in the log and snapshots as VotersRecord control records, and the latest one in the log,
committed or not, is the one in force. Replica ids are unique within a set (DUPLICATE_VOTER).

Entry values in the replicated log (raft.log.Entry.value) are one of:

| value                    | on disk                                                      |
|--------------------------|--------------------------------------------------------------|
| ``bytes``                | a data record (key null): one metadata record                |
| ``raft.log.LeaderChange`` | control record LeaderChangeMessage (type 2)                  |
| ``KRaftVersion``         | control record KRaftVersionRecord (type 5)                   |
| ``VoterSet``             | control record VotersRecord (type 6)                         |
"""
from __future__ import annotations

from dataclasses import dataclass, replace

DEFAULT_LISTENER = "CONTROLLER"
KRAFT_VERSION_MIN = 0
KRAFT_VERSION_MAX = 1


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Voter:
    id: int
    directory_id: bytes | None = None  # 16 bytes; None for a kraft.version 0 static voter
    endpoints: tuple[Endpoint, ...] = ()
    min_kraft_version: int = KRAFT_VERSION_MIN
    max_kraft_version: int = KRAFT_VERSION_MAX

    def matches(self, replica_id: int, directory_id: bytes | None) -> bool:
        """Same replica key; a voter without a directory id matches any directory."""
        return replica_id == self.id and (self.directory_id is None or self.directory_id == directory_id)

    def supports(self, kraft_version: int) -> bool:
        return self.min_kraft_version <= kraft_version <= self.max_kraft_version


@dataclass(frozen=True, slots=True)
class KRaftVersion:
    """The KRaftVersionRecord control record."""

    version: int


@dataclass(frozen=True, slots=True)
class VoterSet:
    """The VotersRecord control record: the whole voter set, ordered by replica id."""

    voters: tuple[Voter, ...]

    @staticmethod
    def of(voters) -> VoterSet:
        return VoterSet(tuple(sorted(voters, key=lambda v: v.id)))

    def ids(self) -> frozenset[int]:
        return frozenset(v.id for v in self.voters)

    def get(self, replica_id: int) -> Voter | None:
        for v in self.voters:
            if v.id == replica_id:
                return v
        return None

    def is_voter(self, replica_id: int, directory_id: bytes | None) -> bool:
        v = self.get(replica_id)
        return v is not None and v.matches(replica_id, directory_id)

    def endpoint(self, replica_id: int) -> Endpoint | None:
        v = self.get(replica_id)
        return v.endpoints[0] if v is not None and v.endpoints else None

    def adding(self, voter: Voter) -> VoterSet:
        return VoterSet.of([*self.voters, voter])

    def removing(self, replica_id: int) -> VoterSet:
        return VoterSet.of(v for v in self.voters if v.id != replica_id)

    def updating(self, voter: Voter) -> VoterSet:
        """Replace the endpoints and kraft.version range of a voter (same replica key)."""
        old = self.get(voter.id)
        directory_id = voter.directory_id if old is None or old.directory_id is None else old.directory_id
        others = [v for v in self.voters if v.id != voter.id]
        return VoterSet.of([*others, replace(voter, directory_id=directory_id)])


def static_voter_set(voters: dict[int, tuple[str, int]], listener: str = DEFAULT_LISTENER) -> VoterSet:
    """kraft.version 0: ``controller.quorum.voters`` parsed to {id: (host, port)}."""
    return VoterSet.of(Voter(i, None, (Endpoint(listener, host, port),), 0, 0)
                       for i, (host, port) in voters.items())
