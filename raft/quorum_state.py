"""The election state of one replica: the roles and every transition between them.

Theory of operation. A replica is always in exactly one role, each a class below. Voters move
Unattached -> Prospective (pre-vote, KIP-996) -> Candidate (epoch + 1) -> Leader; Followers fall
back to Prospective when their fetch timer expires; a Leader that steps down is Resigned until its
election timer expires, then Unattached in the next epoch. Learning a higher epoch moves any role
to Unattached (leader unknown) or Follower (leader known). Observers are only ever Unattached or
Follower. Unattached with ``voted_id`` set is Kafka's "Voted" role.

Durability. ``ElectionState`` (epoch, leader id, voted id) is the quorum-state file. Transitions
marked durable below change it; the new value is queued in ``pending_write`` and the driver must
write it (temp file + fsync + rename) before any message of the same step leaves the process, so a
vote or a candidacy can never be forgotten across a crash (at most one vote per epoch). Prospective
and Resigned are memory-only: they change nothing that is persisted.

| transition                      | from                               | persisted |
|---------------------------------|------------------------------------|-----------|
| become_unattached(epoch, lead.) | any (higher epoch), Resigned, obs. | durable   |
| add_vote(candidate)             | Unattached, Prospective            | durable   |
| become_prospective              | Unattached, Follower, Candidate    | memory    |
| become_candidate (epoch + 1)    | Prospective                        | durable   |
| become_leader                   | Candidate                          | durable   |
| become_follower(epoch, leader)  | any but Leader in the same epoch   | durable   |
| become_resigned(successors)     | Leader                             | memory    |

Initialization (``QuorumState.initialize``), from the stored ElectionState and the log:
stale file (stored epoch < log's last epoch) -> Unattached at the log's epoch; we were the leader
-> Resigned in that epoch (never vote again in it, and an (offset, epoch) pair lost with unflushed
data is never reused); we voted for ourselves and know no leader -> Candidate; a leader whose
endpoint we know -> Follower; otherwise Unattached (keeping the vote).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .messages import NO_LEADER
from .voters import VoterSet

if TYPE_CHECKING:
    from .log import OffsetAndEpoch


@dataclass(frozen=True, slots=True)
class ElectionState:
    """The quorum-state file: Kafka's QuorumStateData (LeaderId, LeaderEpoch, VotedId)."""

    epoch: int
    leader_id: int = NO_LEADER
    voted_id: int = NO_LEADER
    voted_directory_id: bytes | None = None  # KIP-853: the vote is for a replica key


@dataclass(frozen=True, slots=True)
class QuorumConfig:
    """controller.quorum.* settings, in ms (Kafka's defaults)."""

    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    retry_backoff_ms: int = 20
    request_timeout_ms: int = 2000
    fetch_max_wait_ms: int = 500
    fetch_max_entries: int = 100
    election_backoff_base_ms: int = 100  # Kafka's RETRY_BACKOFF_BASE_MS for election backoff


class EpochElection:
    """Tally of (pre-)votes: the local voter grants itself on construction."""

    def __init__(self, local_id: int, voters: frozenset[int]) -> None:
        self.voters = voters
        self.granted = {local_id}
        self.rejected: set[int] = set()

    def record(self, voter_id: int, granted: bool) -> None:
        if voter_id not in self.voters or voter_id in self.granted or voter_id in self.rejected:
            return
        (self.granted if granted else self.rejected).add(voter_id)

    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def is_granted(self) -> bool:
        return len(self.granted) >= self.majority()

    def is_rejected(self) -> bool:
        """Winning is impossible: even every unrecorded voter granting would not make a majority."""
        return len(self.voters) - len(self.rejected) < self.majority()

    def unrecorded(self) -> list[int]:
        return sorted(self.voters - self.granted - self.rejected)


@dataclass
class Unattached:
    epoch: int
    election_deadline_ms: int
    leader_id: int = NO_LEADER  # known but without an endpoint we can fetch from
    voted_id: int = NO_LEADER
    name = "Unattached"

    def election_state(self) -> ElectionState:
        return ElectionState(self.epoch, self.leader_id, self.voted_id)


@dataclass
class Prospective:
    epoch: int
    election_deadline_ms: int
    election: EpochElection
    retries: int
    leader_id: int = NO_LEADER
    voted_id: int = NO_LEADER
    name = "Prospective"

    def election_state(self) -> ElectionState:
        return ElectionState(self.epoch, self.leader_id, self.voted_id)


@dataclass
class Candidate:
    epoch: int
    local_id: int
    election_deadline_ms: int
    election: EpochElection
    retries: int
    backoff_until_ms: int | None = None  # set after losing: strict exponential election backoff
    name = "Candidate"

    def election_state(self) -> ElectionState:
        return ElectionState(self.epoch, NO_LEADER, self.local_id)


@dataclass
class ReplicaState:
    """The leader's view of one replica; ``end_offset`` is its last fetch offset."""

    end_offset: int = -1
    last_fetch_ms: int = -1
    acknowledged: bool = False  # fetched or answered BeginQuorumEpoch in this epoch
    directory_id: bytes | None = None
    last_caught_up_ms: int = -1  # last fetch at or past the leader's log end offset


@dataclass
class Leader:
    epoch: int
    local_id: int
    epoch_start_offset: int
    voters: frozenset[int]
    check_quorum_start_ms: int
    begin_quorum_deadline_ms: int
    replicas: dict[int, ReplicaState] = field(default_factory=dict)
    # Not inherited from the previous leader: unknown (-1) until an entry of this epoch commits.
    high_watermark: int = -1
    fetched_since_check: set[int] = field(default_factory=set)
    # kraft.version 0: what each static voter's UpdateRaftVoter said (kraft_upgrade.py).
    learned_voters: dict = field(default_factory=dict)
    name = "Leader"

    def election_state(self) -> ElectionState:
        return ElectionState(self.epoch, self.local_id, self.local_id)


@dataclass
class Follower:
    epoch: int
    leader_id: int
    fetch_deadline_ms: int
    voted_id: int = NO_LEADER
    has_fetched: bool = False  # a fetch from this leader succeeded: no more pre-votes granted
    fetch_in_flight_until_ms: int | None = None  # one in-flight Fetch, resent after the timeout
    snapshot_id: OffsetAndEpoch | None = None  # being downloaded with FetchSnapshot, if any
    snapshot_position: int = 0
    name = "Follower"

    def election_state(self) -> ElectionState:
        return ElectionState(self.epoch, self.leader_id, self.voted_id)


@dataclass
class Resigned:
    epoch: int
    local_id: int
    election_deadline_ms: int
    preferred_successors: tuple[int, ...]
    unacked_voters: set[int]
    end_quorum_deadline_ms: int = 0  # EndQuorumEpoch is resent to unacked voters after this
    name = "Resigned"

    def election_state(self) -> ElectionState:
        return ElectionState(self.epoch, self.local_id, self.local_id)


EpochState = Unattached | Prospective | Candidate | Leader | Follower | Resigned


class QuorumState:
    """Holds the current role and performs every transition (see the table above)."""

    def __init__(self, local_id: int, voter_set: VoterSet, config: QuorumConfig, rng,
                 directory_id: bytes | None = None, observer: bool = False) -> None:
        self.local_id = local_id
        # A broker's observer: never a voter, and a leader with our id is another process (the
        # controller of a combined node), not us.
        self.observer = observer
        self.directory_id = directory_id
        self.voter_set = voter_set
        self.voters = voter_set.ids()
        self.learned_endpoints: dict[int, tuple] = {}  # leaders outside our voter set (observers)
        self.config = config
        self.rng = rng
        self.state: EpochState = Unattached(0, 0)
        self.pending_write: ElectionState | None = None
        self.voted_directory_id: bytes | None = None  # of voted_id, when that is another replica

    # ---- queries ---------------------------------------------------------------------------
    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def is_voter(self) -> bool:
        """Our replica key (id and directory id) is in the voter set in force."""
        return not self.observer and self.voter_set.is_voter(self.local_id, self.directory_id)

    def is_self(self, replica_id: int) -> bool:
        return replica_id == self.local_id and not self.observer

    def leader_id(self) -> int:
        s = self.state
        if isinstance(s, Leader | Resigned):
            return s.local_id
        if isinstance(s, Follower | Unattached | Prospective):
            return s.leader_id
        return NO_LEADER

    def has_endpoint(self, replica_id: int) -> bool:
        return self.endpoints_of(replica_id) != ()

    def endpoints_of(self, replica_id: int) -> tuple:
        voter = self.voter_set.get(replica_id)
        if voter is not None and voter.endpoints:
            return voter.endpoints
        return self.learned_endpoints.get(replica_id, ())

    def random_election_deadline(self, now_ms: int) -> int:
        t = self.config.election_timeout_ms
        return now_ms + t + self.rng.randrange(t)

    # ---- initialization --------------------------------------------------------------------
    def initialize(self, stored: ElectionState | None, log_last_epoch: int, now_ms: int) -> None:
        if stored is None:
            stored = ElectionState(0)
        self.voted_directory_id = stored.voted_directory_id
        deadline = self.random_election_deadline(now_ms)
        if stored.epoch < log_last_epoch:
            self._durable(Unattached(log_last_epoch, deadline))
        elif self.is_self(stored.leader_id):  # even if since removed from the voter set
            others = set(self.voters - {self.local_id})
            self.state = Resigned(stored.epoch, self.local_id, deadline, (), others)
        elif stored.voted_id == self.local_id and stored.leader_id == NO_LEADER and self.is_voter:
            election = EpochElection(self.local_id, self.voters)
            self.state = Candidate(stored.epoch, self.local_id, deadline, election, retries=1)
        elif stored.leader_id != NO_LEADER and self.has_endpoint(stored.leader_id):
            self.state = Follower(stored.epoch, stored.leader_id, self._fetch_deadline(now_ms),
                                  voted_id=stored.voted_id)
        else:
            self.state = Unattached(stored.epoch, deadline, stored.leader_id, stored.voted_id)

    # ---- transitions -----------------------------------------------------------------------
    def become_unattached(self, epoch: int, now_ms: int, leader_id: int = NO_LEADER) -> None:
        """Durable. A higher epoch with no fetchable leader, or a new epoch after resigning."""
        voted = NO_LEADER
        if epoch == self.epoch and isinstance(self.state, Unattached | Prospective | Follower):
            voted = self.state.voted_id
        elif epoch < self.epoch:
            raise ValueError(f"unattached at epoch {epoch} below {self.epoch}")
        self._durable(Unattached(epoch, self.random_election_deadline(now_ms), leader_id, voted))

    def add_vote(self, candidate_id: int, now_ms: int, directory_id: bytes | None = None) -> None:
        """Durable. Grant our one standard vote of this epoch, to a replica key."""
        s = self.state
        if not isinstance(s, Unattached | Prospective) or s.voted_id not in (NO_LEADER, candidate_id):
            raise ValueError(f"cannot vote for {candidate_id} as {s}")
        if s.voted_id == candidate_id:
            return
        self.voted_directory_id = directory_id
        self._durable(Unattached(s.epoch, self.random_election_deadline(now_ms), s.leader_id, candidate_id))

    def become_prospective(self, now_ms: int, retries: int) -> None:
        """Memory only: a pre-vote does not change the epoch or the vote."""
        s = self.state
        if not self.is_voter or isinstance(s, Leader | Resigned | Prospective):
            raise ValueError(f"cannot become prospective from {s}")
        leader = s.leader_id if isinstance(s, Follower | Unattached) else NO_LEADER
        voted = s.voted_id if isinstance(s, Follower | Unattached) else s.local_id
        self.state = Prospective(s.epoch, self.random_election_deadline(now_ms),
                                 EpochElection(self.local_id, self.voters), retries, leader, voted)

    def become_candidate(self, now_ms: int) -> None:
        """Durable: epoch + 1 and a vote for ourselves."""
        s = self.state
        if not isinstance(s, Prospective):
            raise ValueError(f"cannot become candidate from {s}")
        self._durable(Candidate(s.epoch + 1, self.local_id, self.random_election_deadline(now_ms),
                                EpochElection(self.local_id, self.voters), s.retries))

    def become_leader(self, now_ms: int, epoch_start_offset: int) -> None:
        """Durable. The caller appends the LeaderChange record at ``epoch_start_offset``."""
        s = self.state
        if not isinstance(s, Candidate) or not s.election.is_granted():
            raise ValueError(f"cannot become leader from {s}")
        replicas = {v.id: ReplicaState(directory_id=v.directory_id) for v in self.voter_set.voters}
        self._durable(Leader(s.epoch, self.local_id, epoch_start_offset, self.voters, now_ms, now_ms,
                             replicas))

    def become_follower(self, epoch: int, leader_id: int, now_ms: int) -> None:
        """Durable. Keeps our vote when the epoch does not change."""
        s = self.state
        if epoch < s.epoch or self.is_self(leader_id):
            raise ValueError(f"cannot follow {leader_id} at {epoch} from {s}")
        if epoch == s.epoch and isinstance(s, Leader | Resigned):
            raise ValueError(f"two leaders in epoch {epoch}: {leader_id} and {self.local_id}")
        voted = NO_LEADER
        if epoch == s.epoch:
            voted = s.election_state().voted_id
        self._durable(Follower(epoch, leader_id, self._fetch_deadline(now_ms), voted_id=voted))

    def become_resigned(self, now_ms: int, preferred_successors: tuple[int, ...]) -> None:
        """Memory only: the persisted state (we led this epoch) does not change."""
        s = self.state
        if not isinstance(s, Leader):
            raise ValueError(f"cannot resign from {s}")
        self.state = Resigned(s.epoch, self.local_id, self.random_election_deadline(now_ms),
                              preferred_successors, set(self.voters - {self.local_id}))

    # ---- helpers ---------------------------------------------------------------------------
    def _fetch_deadline(self, now_ms: int) -> int:
        return now_ms + self.config.fetch_timeout_ms

    def _durable(self, state: EpochState) -> None:
        es = state.election_state()
        if es.voted_id == NO_LEADER:
            self.voted_directory_id = None
        voted_directory = self.directory_id if es.voted_id == self.local_id else self.voted_directory_id
        self.pending_write = ElectionState(es.epoch, es.leader_id, es.voted_id, voted_directory)
        self.state = state

    def take_pending_write(self) -> ElectionState | None:
        write, self.pending_write = self.pending_write, None
        return write
