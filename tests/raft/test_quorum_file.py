"""raft/quorum_file.py: the quorum-state file in Kafka's FileQuorumStateStore JSON."""
import json
import os

import pytest

from raft.quorum_file import (
    QUORUM_STATE_FILE,
    QuorumStateData,
    read_quorum_state,
    read_quorum_state_data,
    write_quorum_state,
)
from raft.quorum_state import ElectionState

DIRECTORY_ID = bytes(range(16))


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / QUORUM_STATE_FILE)


def text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def test_a_missing_file_is_no_state(path):
    assert read_quorum_state(path) is None and read_quorum_state_data(path) is None


def test_version_0_for_kraft_version_0_byte_for_byte(path):
    write_quorum_state(path, ElectionState(4, 1, 2), 0, voted_directory_id=DIRECTORY_ID, voter_ids={3, 1, 2})
    assert text(path) == ('{"clusterId":"","leaderId":1,"leaderEpoch":4,"votedId":2,"appliedOffset":0,'
                          '"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}')
    assert read_quorum_state(path) == ElectionState(4, 1, 2)
    assert read_quorum_state_data(path) == QuorumStateData(0, 4, 1, 2, None, (1, 2, 3))


def test_version_1_for_kraft_version_1_byte_for_byte(path):
    write_quorum_state(path, ElectionState(7, -1, 3), 1, voted_directory_id=DIRECTORY_ID, voter_ids=(1, 2))
    assert text(path) == ('{"leaderId":-1,"leaderEpoch":7,"votedId":3,'
                          '"votedDirectoryId":"AAECAwQFBgcICQoLDA0ODw","data_version":1}')
    assert read_quorum_state(path) == ElectionState(7, -1, 3, DIRECTORY_ID)
    assert read_quorum_state_data(path) == QuorumStateData(1, 7, -1, 3, DIRECTORY_ID, ())


def test_version_1_without_a_vote_writes_the_zero_uuid_as_kafka_does(path):
    write_quorum_state(path, ElectionState(2, 5), 1)
    assert json.loads(text(path))["votedDirectoryId"] == "AAAAAAAAAAAAAAAAAAAAAA"
    assert read_quorum_state_data(path).voted_directory_id is None
    assert not [n for n in os.listdir(os.path.dirname(path)) if n != QUORUM_STATE_FILE]  # no temp left


@pytest.mark.parametrize("line, expected", [
    # FileQuorumStateStore's own examples
    ('{"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,"currentVoters":[],'
     '"data_version":0}', QuorumStateData(0, 2, 1, -1, None, ())),
    ('{"leaderId":-1,"leaderEpoch":2,"votedId":1,"votedDirectoryId":"J8aAPcfLQt2bqs1JT_rMgQ","data_version":1}',
     QuorumStateData(1, 2, -1, 1, bytes.fromhex("27c6803dc7cb42dd9baacd494ffacc81"), ())),
    # written by the single-voter stand-in (controller/metadata_log.py)
    ('{"clusterId": "abc", "leaderId": 1, "leaderEpoch": 4, "votedId": 1, "appliedOffset": 0, '
     '"currentVoters": [{"voterId": 1}], "data_version": 0}', QuorumStateData(0, 4, 1, 1, None, (1,))),
    ('{"leaderId":3,"leaderEpoch":9,"votedId":-1,"data_version":1}\nignored', QuorumStateData(1, 9, 3, -1)),
    ('{"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,"currentVoters":null,'
     '"data_version":0}', QuorumStateData(0, 2, 1, -1, None, ())),
])
def test_kafkas_files_read(path, line, expected):
    with open(path, "w", encoding="utf-8") as f:
        f.write(line)
    assert read_quorum_state_data(path) == expected
    assert read_quorum_state(path) == expected.election_state()


@pytest.mark.parametrize("content", [
    "", "not json", "[1, 2]", '{"leaderId":1,"leaderEpoch":2,"votedId":-1}',
    '{"leaderId":1,"leaderEpoch":2,"votedId":-1,"data_version":2}',
    '{"leaderId":1,"leaderEpoch":"2","votedId":-1,"data_version":1}',
    '{"leaderId":1,"votedId":-1,"data_version":1}',
    '{"leaderId":1,"leaderEpoch":2,"votedId":-1,"votedDirectoryId":"short","data_version":1}',
    '{"leaderId":1,"leaderEpoch":2,"votedId":-1,"currentVoters":[{"id":1}],"data_version":0}',
])
def test_an_unreadable_file_names_its_path(path, content):
    with open(path, "w", encoding="utf-8") as f:
        f.write(content)
    with pytest.raises(ValueError, match=path):
        read_quorum_state(path)


def test_a_rewrite_replaces_the_file_and_can_change_version(path):
    write_quorum_state(path, ElectionState(1, -1, 1), 0, voter_ids=[1])
    write_quorum_state(path, ElectionState(2, 1, 1), 1, voted_directory_id=DIRECTORY_ID)
    assert read_quorum_state_data(path) == QuorumStateData(1, 2, 1, 1, DIRECTORY_ID, ())
    assert text(path).count("\n") == 0
