"""AlterPartition (key 56) on the active controller: each validation rule of the chapter and its
error code, the committed PartitionChangeRecord, and the answer."""
from metadata.image import RECOVERED, RECOVERING
from protocol import messages as M
from protocol.errors import Error
from tests.controller.scenario import Scenario


def topic(s: Scenario, replicas=(1, 2, 3), name="t"):
    """The new partition's state, as a copy: the image's own object changes with the log."""
    s.create_topic(name, assignments={0: list(replicas)})
    return s.partition(name).copy()


def test_alter_partition_shrink_commits_a_partition_change_and_answers_the_new_state():
    s = Scenario()
    p = topic(s)
    epoch_before = p.partition_epoch
    answer = s.alter_partition(1, "t", 0, [1, 2])
    assert answer.error_code == Error.NONE
    assert [type(r) for r in s.last_records] == [M.PartitionChangeRecord]
    assert s.last_records[0].isr == [1, 2] and s.last_records[0].leader == -2
    after = s.partition("t")
    assert after.isr == [1, 2] and after.partition_epoch == epoch_before + 1
    assert after.leader_epoch == p.leader_epoch, "an ISR change keeps the leader epoch"
    assert (answer.leader_id, answer.leader_epoch, answer.isr, answer.leader_recovery_state,
            answer.partition_epoch) == (1, after.leader_epoch, [1, 2], RECOVERED, after.partition_epoch)


def test_alter_partition_no_op_is_answered_with_the_current_state_without_a_record():
    s = Scenario()
    p = topic(s)
    answer = s.alter_partition(1, "t", 0, [1, 2, 3])
    assert answer.error_code == Error.NONE and s.last_records == []
    assert (answer.isr, answer.partition_epoch) == ([1, 2, 3], p.partition_epoch)


def test_alter_partition_rejects_unknown_topic_and_partition():
    s = Scenario()
    topic(s)
    R = M.AlterPartitionRequest
    D = R.TopicData.PartitionData
    req = R(broker_id=1, broker_epoch=s.epoch(1), topics=[
        R.TopicData(topic_id=bytes(16), partitions=[D(partition_index=0)]),
        R.TopicData(topic_id=s.image.topics["t"].topic_id, partitions=[D(partition_index=7)])])
    response = s.apply(s.replication.alter_partition(s.image, req, 3))
    assert response.topics[0].partitions[0].error_code == Error.UNKNOWN_TOPIC_ID
    assert response.topics[1].partitions[0].error_code == Error.UNKNOWN_TOPIC_OR_PARTITION


def test_alter_partition_rejects_a_stale_sender_broker_epoch():
    s = Scenario()
    topic(s)
    assert s.alter_partition(1, "t", 0, [1, 2], sender_epoch=s.epoch(1) - 1) == Error.STALE_BROKER_EPOCH


def test_alter_partition_rejects_an_older_leader_epoch_with_fenced_leader_epoch():
    s = Scenario()
    p = topic(s)
    s.set_partition("t", leader=1)  # a new leader epoch
    answer = s.alter_partition(1, "t", 0, [1, 2], leader_epoch=p.leader_epoch)
    assert answer.error_code == Error.FENCED_LEADER_EPOCH and s.last_records == []


def test_alter_partition_with_a_newer_epoch_than_ours_is_not_controller():
    s = Scenario()
    p = topic(s)
    assert s.alter_partition(1, "t", 0, [1, 2], leader_epoch=p.leader_epoch + 1).error_code \
        == Error.NOT_CONTROLLER
    assert s.alter_partition(1, "t", 0, [1, 2], partition_epoch=p.partition_epoch + 1).error_code \
        == Error.NOT_CONTROLLER


def test_alter_partition_from_a_broker_that_is_not_the_leader_is_invalid_request():
    s = Scenario()
    topic(s)
    assert s.alter_partition(2, "t", 0, [1, 2]).error_code == Error.INVALID_REQUEST


def test_alter_partition_rejects_stale_partition_epoch_with_invalid_update_version():
    s = Scenario()
    p = topic(s)
    assert s.alter_partition(1, "t", 0, [1, 2]).error_code == Error.NONE
    # A second proposal built on the state before the first one was committed.
    answer = s.alter_partition(1, "t", 0, [1], partition_epoch=p.partition_epoch)
    assert answer.error_code == Error.INVALID_UPDATE_VERSION and s.last_records == []
    assert s.partition("t").isr == [1, 2]


def test_alter_partition_isr_must_be_a_subset_of_the_assignment_holding_the_leader():
    s = Scenario(brokers=4)
    topic(s)
    assert s.alter_partition(1, "t", 0, [1, 2, 4]).error_code == Error.INVALID_REQUEST
    assert s.alter_partition(1, "t", 0, [2, 3]).error_code == Error.INVALID_REQUEST
    assert s.alter_partition(1, "t", 0, [1, 2, 2]).error_code == Error.INVALID_REQUEST
    assert s.partition("t").isr == [1, 2, 3]


def test_alter_partition_rejects_a_fenced_or_shutting_down_or_unregistered_member_as_ineligible():
    s = Scenario(brokers=4)
    topic(s, replicas=(1, 2, 3, 4))
    s.set_partition("t", isr=[1])
    s.cluster.connection_closed(s.connections[2], s.now)
    s.advance(1000)
    s.heartbeat(1)
    s.heartbeat(3)
    s.heartbeat(4)
    s.tick()
    assert s.fenced(2)
    assert s.alter_partition(1, "t", 0, [1, 2]).error_code == Error.INELIGIBLE_REPLICA
    s.heartbeat(3, want_shut_down=True)
    assert s.image.brokers[3].in_controlled_shutdown or s.fenced(3)
    assert s.alter_partition(1, "t", 0, [1, 3]).error_code == Error.INELIGIBLE_REPLICA
    assert s.alter_partition(1, "t", 0, [1, 4]).error_code == Error.NONE


def test_alter_partition_v3_rejects_a_member_whose_broker_epoch_changed():
    s = Scenario()
    topic(s)
    s.set_partition("t", isr=[1, 2])
    stale = {3: s.epoch(3) - 1}
    assert s.alter_partition(1, "t", 0, [1, 2, 3], epochs=stale).error_code == Error.INELIGIBLE_REPLICA
    assert s.alter_partition(1, "t", 0, [1, 2, 3], epochs={3: -1}).error_code == Error.NONE, \
        "-1 skips the broker epoch check"


def test_alter_partition_v2_takes_new_isr_without_epochs():
    s = Scenario()
    topic(s)
    answer = s.alter_partition(1, "t", 0, [1, 3], version=2)
    assert answer.error_code == Error.NONE and s.partition("t").isr == [1, 3]


def test_recovering_partition_refuses_isr_growth():
    s = Scenario()
    topic(s)
    s.set_partition("t", isr=[1], leader_recovery_state=RECOVERING)
    answer = s.alter_partition(1, "t", 0, [1, 2], leader_recovery_state=RECOVERING)
    assert answer.error_code == Error.INVALID_REQUEST
    # Once the leader has recovered it says so, and may grow the ISR in the same change.
    answer = s.alter_partition(1, "t", 0, [1, 2], leader_recovery_state=RECOVERED)
    assert answer.error_code == Error.NONE and answer.leader_recovery_state == RECOVERED
    assert s.partition("t").leader_recovery_state == RECOVERED and s.partition("t").isr == [1, 2]


def test_recovered_partition_never_goes_back_to_recovering():
    s = Scenario()
    topic(s)
    answer = s.alter_partition(1, "t", 0, [1], leader_recovery_state=RECOVERING)
    assert answer.error_code == Error.INVALID_REQUEST
    assert s.partition("t").leader_recovery_state == RECOVERED


def test_alter_partition_shrink_below_min_isr_makes_the_removed_replicas_eligible_leaders():
    s = Scenario(min_isr=2)
    topic(s)
    s.alter_partition(1, "t", 0, [1, 2])
    assert s.partition("t").elr == [], "at min ISR nothing is eligible beyond the ISR"
    s.alter_partition(1, "t", 0, [1])
    assert s.partition("t").isr == [1] and s.partition("t").elr == [2]
    s.alter_partition(1, "t", 0, [1, 2])
    assert s.partition("t").elr == [], "back at min ISR: the ELR is cleared"
