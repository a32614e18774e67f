"""Three real `strom controller` processes on 127.0.0.1 form a KRaft quorum (KIP-595/853).

Default timeouts throughout (controller.quorum.election.timeout.ms=1000, fetch.timeout.ms=2000).
"""
import json
import re
import statistics
import time

import pytest

from tests.integration.quorum_cluster import CLUSTER_ID, ControllerQuorum, _meta_directory_id

# The default run kills the leader three times (the later kills fail over a quorum holding a
# controller restarted after an earlier one); ``-m slow`` kills it twenty times.
TRIALS = [3, pytest.param(20, marks=pytest.mark.slow)]
# A killed leader's followers see its connections close and canvass at once (tens of ms here;
# bench/test_bench_raft.py's test_raft_failover measures the spread). With fetch.timeout.ms at a
# minute, a follower that waited it out instead could not elect anyone within FAILOVER_WAIT_S:
# the bound is a timeout, far above the failover it waits for, and tells the two paths apart.
LONG_FETCH_TIMEOUT = {"controller.quorum.fetch.timeout.ms": "60000"}
FAILOVER_WAIT_S = 20
REJOIN_WAIT_S = 45


def _started(extra=None):
    q = ControllerQuorum(3, extra=extra).start()
    try:
        yield q
    finally:
        q.close()


@pytest.fixture
def quorum():
    yield from _started()


@pytest.fixture
def quorum_without_fetch_timeouts():
    yield from _started(LONG_FETCH_TIMEOUT)


def quorum_cli(q: ControllerQuorum, *args: str):
    return q.controllers[1].run_cli("quorum", "--bootstrap-controller", q.bootstrap, *args)


def test_three_controllers_elect_a_leader_and_describe_matches_the_live_state(quorum):
    view = quorum.wait_for_leader()
    assert view.voter_ids() == {1, 2, 3}
    assert {(v.replica_id, v.directory_id) for v in view.voters} == {
        (c.node_id, c.directory_id) for c in quorum.controllers.values()}
    view = quorum.wait_for(lambda v: all(r.log_end_offset == v.high_watermark for r in v.voters), 10,
                           "the followers did not catch up")
    status = quorum_cli(quorum, "describe", "--status")
    assert status.returncode == 0, status.stderr
    fields = dict(re.findall(r"^(\w+):\s+(.*)$", status.stdout, re.M))
    assert fields["ClusterId"] == CLUSTER_ID
    assert int(fields["LeaderId"]) == view.leader_id
    assert int(fields["LeaderEpoch"]) == view.leader_epoch
    assert int(fields["HighWatermark"]) >= view.high_watermark
    voters = json.loads(fields["CurrentVoters"])
    assert sorted((v["id"], v["directoryId"]) for v in voters) == sorted(
        (c.node_id, c.directory_id) for c in quorum.controllers.values())
    assert json.loads(fields["CurrentObservers"]) == []
    replication = quorum_cli(quorum, "describe", "--replication")
    assert replication.returncode == 0, replication.stderr
    rows = [line.split() for line in replication.stdout.splitlines()[1:] if line.strip()]
    assert sorted(int(r[0]) for r in rows) == [1, 2, 3]
    assert [r[-1] for r in rows].count("Leader") == 1


@pytest.mark.parametrize("trials", TRIALS)
def test_kill9_of_the_leader_yields_a_new_leader_that_commits_without_a_fetch_timeout_every_time(
        quorum_without_fetch_timeouts, trials):
    quorum = quorum_without_fetch_timeouts
    failovers = []
    for trial in range(trials):
        old = quorum.wait_for_leader()
        killed = quorum.controllers[old.leader_id]
        killed.kill9()
        started = time.monotonic()
        new = quorum.wait_for(
            lambda v, old=old: v.leader_epoch > old.leader_epoch and v.committed_own_epoch(), FAILOVER_WAIT_S,
            f"trial {trial}: no new leader committed after killing {old.leader_id} (fetch.timeout.ms 60 s)")
        failovers.append(time.monotonic() - started)
        assert new.leader_id != old.leader_id
        assert new.high_watermark >= old.high_watermark
        # The killed controller restarts on the same directory and rejoins as a voter.
        killed.start()
        quorum.wait_for(lambda v, k=killed.node_id: any(
            r.replica_id == k and r.log_end_offset >= v.high_watermark for r in v.voters), REJOIN_WAIT_S,
            f"trial {trial}: controller {killed.node_id} did not rejoin")
    print(f"failover s over {trials} kills: min {min(failovers):.3f} median "
          f"{statistics.median(failovers):.3f} max {max(failovers):.3f}")


def test_a_controller_whose_directory_was_wiped_is_an_observer_until_it_is_added(quorum):
    view = quorum.wait_for_leader()
    victim = quorum.controllers[next(i for i in (1, 2, 3) if i != view.leader_id)]
    old_directory = victim.directory_id
    victim.kill9()
    victim.wipe()
    victim.format()  # no voter set: a new directory id
    victim.directory_id = _meta_directory_id(victim.metadata_dir)
    assert victim.directory_id != old_directory
    victim.start()
    key = (victim.node_id, victim.directory_id)
    view = quorum.wait_for(lambda v: key in {(o.replica_id, o.directory_id) for o in v.observers}, 20,
                           "the wiped controller is not an observer")
    assert (victim.node_id, old_directory) in {(v.replica_id, v.directory_id) for v in view.voters}
    removed = quorum_cli(quorum, "remove-controller", "--controller-id", str(victim.node_id),
                         "--controller-uuid", old_directory)
    assert removed.returncode == 0, removed.stdout + removed.stderr
    quorum.wait_for(lambda v: v.voter_ids() == {1, 2, 3} - {victim.node_id}, 20,
                    "the old disk was not removed")
    added = quorum_cli(quorum, "add-controller", "--config", victim.config_path)
    assert added.returncode == 0, added.stdout + added.stderr
    view = quorum.wait_for(lambda v: key in {(r.replica_id, r.directory_id) for r in v.voters}, 20,
                           "the new disk was not added")
    assert view.voter_ids() == {1, 2, 3}


def test_a_new_controller_is_added_then_removed_with_the_quorum_command(quorum):
    quorum.wait_for_leader()
    spare = quorum.spare(4).start()
    quorum.wait_for(lambda v: 4 in {o.replica_id for o in v.observers}, 20, "controller 4 is not an observer")
    added = quorum_cli(quorum, "add-controller", "--config", spare.config_path)
    assert added.returncode == 0, added.stdout + added.stderr
    view = quorum.wait_for(lambda v: v.voter_ids() == {1, 2, 3, 4}, 20, "controller 4 was not added")
    assert (4, spare.directory_id) in {(r.replica_id, r.directory_id) for r in view.voters}
    removed = quorum_cli(quorum, "remove-controller", "--controller-id", "4", "--controller-uuid",
                         spare.directory_id)
    assert removed.returncode == 0, removed.stdout + removed.stderr
    quorum.wait_for(lambda v: v.voter_ids() == {1, 2, 3}, 20, "controller 4 was not removed")
    # Still a working quorum of three: kill the leader once more.
    old = quorum.wait_for_leader()
    quorum.controllers[old.leader_id].kill9()
    quorum.wait_for(lambda v: v.leader_epoch > old.leader_epoch and v.committed_own_epoch(), 15,
                    "no new leader after the removal")


def test_a_controller_with_auto_join_adds_itself_to_the_voters(quorum):
    quorum.wait_for_leader()
    spare = quorum.spare(4, {"controller.quorum.auto.join.enable": "true"}).start()
    view = quorum.wait_for(lambda v: v.voter_ids() == {1, 2, 3, 4}, 30, "controller 4 did not join")
    assert (4, spare.directory_id) in {(r.replica_id, r.directory_id) for r in view.voters}


def test_a_broker_follows_the_active_controller_across_a_failover(quorum):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    quorum.wait_for_leader()
    broker = quorum.broker(10).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("before", 2, 1)])["before"].result(30)
    old = quorum.wait_for_leader()
    assert 10 in {o.replica_id for o in old.observers}  # the broker observes the metadata log
    quorum.controllers[old.leader_id].kill9()
    quorum.wait_for(lambda v: v.leader_epoch > old.leader_epoch and v.committed_own_epoch(), 15,
                    "no new leader")
    admin.create_topics([NewTopic("after", 3, 1)])["after"].result(30)
    topics = admin.list_topics(timeout=30).topics
    assert len(topics["before"].partitions) == 2 and len(topics["after"].partitions) == 3
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("after", b"v", partition=2)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g"})
    consumer.assign([TopicPartition("after", 2, 0)])
    message = consumer.poll(30)
    consumer.close()
    assert message is not None and message.value() == b"v"


def test_a_static_quorum_is_made_dynamic_by_upgrading_kraft_version_through_a_broker():
    """KIP-853's upgrade: controllers with controller.quorum.voters run kraft.version 0; once the
    leader knows each voter's kraft.version range and directory id, `strom features upgrade
    --feature kraft.version=1` (through a broker, which forwards UpdateFeatures) writes the
    voters into the log, after which the quorum changes its voters with `strom quorum`."""
    q = ControllerQuorum(3, static=True).start()
    try:
        q.wait_for_leader()
        broker = q.broker(10).start()

        def kraft_version() -> str:
            done = q.controllers[1].run_cli("features", "--bootstrap-server", broker.bootstrap, "describe")
            assert done.returncode == 0, done.stderr
            found = re.search(r"^Feature: kraft.version\t.*FinalizedVersionLevel: (\d+)", done.stdout, re.M)
            assert found, done.stdout
            return found.group(1)

        assert kraft_version() == "0"
        # the leader learns each voter's directory id and range from its fetches and
        # UpdateRaftVoter; until then the upgrade is refused
        deadline, upgrade = time.monotonic() + 30, None
        while time.monotonic() < deadline:
            upgrade = q.controllers[1].run_cli("features", "--bootstrap-server", broker.bootstrap,
                                               "upgrade", "--feature", "kraft.version=1")
            if upgrade.returncode == 0:
                break
            time.sleep(1)
        assert upgrade is not None and upgrade.returncode == 0, upgrade.stdout + upgrade.stderr
        assert "kraft.version was upgraded to 1." in upgrade.stdout
        assert kraft_version() == "1"
        view = q.wait_for_leader()
        assert {(v.replica_id, v.directory_id) for v in view.voters} == {
            (c.node_id, c.directory_id) for i, c in q.controllers.items() if i != 10}
        follower = next(i for i in (1, 2, 3) if i != view.leader_id)
        removed = quorum_cli(q, "remove-controller", "--controller-id", str(follower),
                             "--controller-directory-id", q.controllers[follower].directory_id)
        assert removed.returncode == 0, removed.stderr
        q.wait_for(lambda v: v.voter_ids() == {1, 2, 3} - {follower}, 15, "the voter was not removed")
        downgrade = q.controllers[1].run_cli("features", "--bootstrap-server", broker.bootstrap,
                                             "downgrade", "--feature", "kraft.version=0", "--unsafe")
        assert downgrade.returncode == 1
    finally:
        q.close()
