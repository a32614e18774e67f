"""The ``quorum-state`` file: Kafka's QuorumStateData as one line of JSON, plus ``data_version``.

Written at the data version that matches kraft.version (KIP-853): 0 for kraft.version 0, 1 from
kraft.version 1. Both are read. Fields, in Kafka's order (FileQuorumStateStore appends
``data_version`` last):

| field            | type            | v0 | v1 | meaning                                           |
|------------------|-----------------|----|----|---------------------------------------------------|
| clusterId        | string          | x  |    | always "" (the cluster id is in meta.properties)  |
| leaderId         | int32           | x  | x  | the leader of leaderEpoch, -1 if unknown          |
| leaderEpoch      | int32           | x  | x  | the epoch                                         |
| votedId          | int32           | x  | x  | the candidate voted for in leaderEpoch, -1 if none |
| votedDirectoryId | uuid (base64)   |    | x  | its directory id; the zero uuid when none         |
| appliedOffset    | int64           | x  |    | always 0                                          |
| currentVoters    | [{"voterId"}]   | x  |    | the static voter ids (kraft.version 0)            |
| data_version     | int16           | x  | x  | 0 or 1                                            |

Examples::

    {"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,
     "currentVoters":[{"voterId":1},{"voterId":2}],"data_version":0}
    {"leaderId":-1,"leaderEpoch":2,"votedId":1,"votedDirectoryId":"J8aAPcfLQt2bqs1JT_rMgQ","data_version":1}

Kafka's generated JSON reader requires votedDirectoryId in version 1, so it is always written
(the zero uuid ``AAAAAAAAAAAAAAAAAAAAAA`` for "none"); a file without it still reads. The file is
replaced atomically (temp file + fsync + rename + directory fsync): a crash leaves the old state
or the new one, never a torn file, which is what makes a vote durable.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from engine.checkpoint import uuid_from_str, uuid_to_str, write_atomically

from .messages import NO_LEADER
from .quorum_state import ElectionState

QUORUM_STATE_FILE = "quorum-state"
LOWEST_DATA_VERSION = 0
HIGHEST_DATA_VERSION = 1
_ZERO_UUID = bytes(16)


@dataclass(frozen=True, slots=True)
class QuorumStateData:
    """Everything the file holds (ElectionState plus what only the file keeps)."""

    data_version: int
    leader_epoch: int
    leader_id: int = NO_LEADER
    voted_id: int = NO_LEADER
    voted_directory_id: bytes | None = None  # version 1
    current_voters: tuple[int, ...] = ()  # version 0

    def election_state(self) -> ElectionState:
        return ElectionState(self.leader_epoch, self.leader_id, self.voted_id, self.voted_directory_id)


def data_version_for(kraft_version: int) -> int:
    return 0 if kraft_version <= 0 else 1


def build_quorum_state(data: QuorumStateData) -> bytes:
    if data.data_version == 0:
        obj = {"clusterId": "", "leaderId": data.leader_id, "leaderEpoch": data.leader_epoch,
               "votedId": data.voted_id, "appliedOffset": 0,
               "currentVoters": [{"voterId": i} for i in data.current_voters]}
    elif data.data_version == 1:
        voted = _ZERO_UUID if data.voted_directory_id is None else data.voted_directory_id
        obj = {"leaderId": data.leader_id, "leaderEpoch": data.leader_epoch, "votedId": data.voted_id,
               "votedDirectoryId": uuid_to_str(voted)}
    else:
        raise ValueError(f"quorum state data_version {data.data_version} is not 0 or 1")
    obj["data_version"] = data.data_version
    return json.dumps(obj, separators=(",", ":")).encode()


def parse_quorum_state(text: str) -> QuorumStateData:
    """ValueError for anything that is not a quorum state of version 0 or 1."""
    lines = text.splitlines()
    if not lines:
        raise ValueError("empty file")
    obj = json.loads(lines[0])  # Kafka reads the first line only
    if not isinstance(obj, dict):
        raise ValueError(f"not a JSON object: {lines[0]!r}")
    if "data_version" not in obj:
        raise ValueError("no data_version field")
    version = _int(obj, "data_version")
    if not LOWEST_DATA_VERSION <= version <= HIGHEST_DATA_VERSION:
        raise ValueError(f"data_version {version} is not within "
                         f"[{LOWEST_DATA_VERSION}, {HIGHEST_DATA_VERSION}]")
    voted_directory_id = None
    voters: tuple[int, ...] = ()
    if version >= 1 and obj.get("votedDirectoryId") is not None:
        raw = obj["votedDirectoryId"]
        if not isinstance(raw, str):
            raise ValueError(f"votedDirectoryId is not a uuid string: {raw!r}")
        voted_directory_id = uuid_from_str(raw)
        if voted_directory_id == _ZERO_UUID:
            voted_directory_id = None
    if version == 0 and obj.get("currentVoters") is not None:
        if not isinstance(obj["currentVoters"], list):
            raise ValueError("currentVoters is not a list")
        voters = tuple(_int(v, "voterId") for v in obj["currentVoters"])
    return QuorumStateData(version, _int(obj, "leaderEpoch"), _int(obj, "leaderId"), _int(obj, "votedId"),
                           voted_directory_id, voters)


def _int(obj, name: str) -> int:
    value = obj.get(name) if isinstance(obj, dict) else None
    if type(value) is not int:
        raise ValueError(f"{name} is missing or not an integer: {value!r}")
    return value


def read_quorum_state_data(path: str) -> QuorumStateData | None:
    """The whole file; None when there is none, ValueError naming ``path`` when it is unreadable."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: unreadable quorum state: {e}") from None
    try:
        return parse_quorum_state(text)
    except ValueError as e:  # json.JSONDecodeError is a ValueError
        raise ValueError(f"{path}: unreadable quorum state: {e}") from None


def read_quorum_state(path: str) -> ElectionState | None:
    data = read_quorum_state_data(path)
    return None if data is None else data.election_state()


def write_quorum_state(path: str, state: ElectionState, kraft_version: int,
                       voted_directory_id: bytes | None = None, voter_ids=()) -> None:
    """Replace the file atomically with ``state`` at the data version of ``kraft_version``.
    ``voted_directory_id`` is kept from version 1, ``voter_ids`` (currentVoters) in version 0."""
    data = QuorumStateData(data_version_for(kraft_version), state.epoch, state.leader_id, state.voted_id,
                           voted_directory_id, tuple(sorted(voter_ids)))
    write_atomically(path, build_quorum_state(data))


__all__ = [
    "QUORUM_STATE_FILE", "QuorumStateData", "read_quorum_state", "read_quorum_state_data",
    "write_quorum_state", "build_quorum_state", "parse_quorum_state", "data_version_for",
]
