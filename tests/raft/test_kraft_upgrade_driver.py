"""kraft.version 0 -> 1 through RaftDrivers over real sockets (test_driver.py's nodes): static
voters (``controller.quorum.voters``: no directory ids, kraft.version range unknown) tell the
leader theirs with UpdateRaftVoter, and the leader's upgrade reaches every voter over Fetch."""
from __future__ import annotations

import pytest

from raft import wire
from raft.voters import KRaftVersion, Voter, VoterSet, static_voter_set
from tests.raft.test_driver import HOST, Node, describe_quorum, elected, eventually, run


@pytest.mark.timeout(40)
def test_a_static_quorum_upgraded_to_kraft_version_1_has_the_voters_directory_ids_everywhere():
    async def scenario():
        nodes = [Node(i) for i in (1, 2, 3)]
        voters = static_voter_set({n.node_id: (HOST, n.port) for n in nodes})
        try:
            for n in nodes:
                await n.start(voters, seed=n.node_id, directory_id=n.directory_id)
            leader = await elected(nodes)
            followers = [n for n in nodes if n is not leader]
            led = leader.driver.leader_and_epoch()
            await eventually(lambda: all(n.driver.voter_client.acknowledged == led for n in followers),
                             5, "UpdateRaftVoter at kraft.version 0 acknowledged by the leader")
            assert leader.driver.core.kraft_version == 0
            offset = leader.driver.upgrade_kraft_version(1)
            assert offset is not None
            await leader.driver.wait_committed(offset + 1, 5)
            upgraded = VoterSet.of(Voter(n.node_id, n.directory_id, n.endpoints, 0, 1) for n in nodes)
            await eventually(lambda: all(n.driver.core.kraft_version == 1 for n in nodes), 5,
                             "kraft.version 1 everywhere")
            assert leader.log.read(offset, 2)[0].value == KRaftVersion(1)
            for n in nodes:
                assert n.driver.core.voter_set == upgraded and n.driver.core.quorum.is_voter
            d = wire.parse_describe_quorum_response(await describe_quorum(leader.port, 2))
            assert {v.replica_id: v.directory_id for v in d.voters} == {
                n.node_id: n.directory_id for n in nodes}
            last = leader.driver.append([b"after"])
            await leader.driver.wait_committed(last, 5)
        finally:
            for n in nodes:
                await n.stop(graceful=False)

    run(scenario(), 30)
