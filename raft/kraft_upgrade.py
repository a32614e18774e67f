"""Upgrading kraft.version 0 -> 1 on the leader: a static quorum made dynamic (KIP-853).

Theory of operation. With kraft.version 0 the voter set is ``controller.quorum.voters``: replica
ids and endpoints, no directory ids, and each voter's supported kraft.version range unknown
(0-0). The leader learns what a VotersRecord needs while it leads, as Kafka's LeaderState keeps
its in-memory voters:

| learned                    | from                                                             |
|----------------------------|------------------------------------------------------------------|
| a voter's directory id     | its Fetch requests (ReplicaDirectoryId), or its UpdateRaftVoter  |
| its kraft.version range    | its UpdateRaftVoter (sent at kraft.version 0 too; nothing is     |
| and endpoints              | written, the answer is NONE)                                     |
| the leader's own           | its directory id, its local endpoints and this software's range  |

``RaftCore.upgrade_kraft_version`` then checks, in Kafka's order (LeaderState.
maybeAppendUpgradedKRaftVersion): the same version already in force, or appended and not yet
committed, is a no-op; a lower one is a downgrade and refused; every voter must support the new
version and have a known directory id; no voter change may be in progress. It appends one control
batch, KRaftVersionRecord(1) then a VotersRecord of the current voters with what was learned, and
the quorum is dynamic from there (the records are in force once in the log, as every control
record: membership.py). ``validate_only`` runs every check and writes nothing. A refusal is
``KRaftUpgradeError`` (INVALID_UPDATE_VERSION, Kafka's message); not leading, or a stale epoch,
is ``NotLeaderError``.
"""
from __future__ import annotations

from dataclasses import replace

from . import messages as m
from .core_view import CoreView
from .errors import NotLeaderError
from .quorum_state import Leader
from .voters import KRAFT_VERSION_MAX, KRAFT_VERSION_MIN, KRaftVersion, Voter, VoterSet

FEATURE_NAME = "kraft.version"


class KRaftUpgradeError(RuntimeError):
    """The upgrade is refused: Kafka's InvalidUpdateVersionException."""

    error_code = m.INVALID_UPDATE_VERSION


class KRaftUpgradeHandlers(CoreView):
    def _upgrade_kraft_version(self, now_ms: int, version: int, validate_only: bool,
                               epoch: int | None) -> int | None:
        """The offset of the appended KRaftVersionRecord, or None when nothing was appended."""
        s = self.quorum.state
        if not isinstance(s, Leader):
            raise NotLeaderError(f"{self.local_id} is {s.name}")
        if epoch is not None and epoch < s.epoch:
            raise NotLeaderError(f"Upgrade kraft version failed because the given epoch {epoch} is stale. "
                                 f"Current leader epoch is {s.epoch}")
        if epoch is not None and epoch > s.epoch:
            raise KRaftUpgradeError(f"Attempt to append from epoch {epoch} which is larger than the current "
                                    f"epoch of {s.epoch}")
        current = self.kraft_version
        if version == current:
            return None
        if version < current:
            raise KRaftUpgradeError(f"Invalid upgrade of {FEATURE_NAME} from version {current} to {version} "
                                    "because the new version is a downgrade")
        if current != 0 or version != 1:
            raise KRaftUpgradeError(f"Invalid upgrade of {FEATURE_NAME} from version {current} to {version}")
        if self._pending_change is not None:
            raise KRaftUpgradeError(f"Unable to upgrade version for {FEATURE_NAME} to {version} due to "
                                    "changing voters")
        voters = self.upgraded_voters(s)
        if not all(v.supports(version) for v in voters.voters):
            raise KRaftUpgradeError(f"Invalid upgrade of {FEATURE_NAME} to {version} because not all of the "
                                    "voters support it")
        unknown = [v.id for v in voters.voters if v.directory_id is None]
        if unknown:
            raise KRaftUpgradeError(f"Directory id must be known for all of the voters: voters {unknown} "
                                    "have not told theirs")
        if validate_only:
            return None
        return self._append_as_leader(now_ms, s, [KRaftVersion(version), voters])

    def upgraded_voters(self, s: Leader) -> VoterSet:
        """The voter set as the leader knows it now: the static set with what was learned."""
        voters = []
        for v in self.voter_set.voters:
            if v.id == self.local_id:
                voters.append(Voter(v.id, self.directory_id, self.local_endpoints() or v.endpoints,
                                    KRAFT_VERSION_MIN, KRAFT_VERSION_MAX))
                continue
            learned = s.learned_voters.get(v.id)
            if learned is not None:
                v = replace(v, endpoints=learned.endpoints or v.endpoints,
                            min_kraft_version=learned.min_kraft_version,
                            max_kraft_version=learned.max_kraft_version,
                            directory_id=learned.directory_id or v.directory_id)
            replica = s.replicas.get(v.id)
            if v.directory_id is None and replica is not None:
                v = replace(v, directory_id=replica.directory_id)
            voters.append(v)
        return VoterSet.of(voters)

    def _learn_static_voter(self, s: Leader, voter: Voter) -> None:
        """kraft.version 0: an UpdateRaftVoter from a static voter is remembered, not written."""
        s.learned_voters[voter.id] = voter
        replica = s.replicas.get(voter.id)
        if replica is not None and voter.directory_id is not None:
            replica.directory_id = voter.directory_id
