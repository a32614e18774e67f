"""OffsetCommit's validation order, OffsetDelete and group configs, as Kafka 4.x's group
coordinator answers them (OffsetMetadataManager, ClassicGroup and ConsumerGroup
validateOffsetCommit / validateOffsetDelete / isSubscribedToTopic, GroupConfig): one test
per branch, under a clock the test controls."""
import struct

from broker.groups.consumer_group import ConsumerGroupConfig
from broker.groups.group import DEAD
from protocol import messages as M
from protocol.errors import Error
from tests.groups.scenario import Scenario

R = M.ConsumerGroupHeartbeatRequest
T1 = b"\x01" * 16
TOPICS = {"t1": (T1, 2)}


def _subscription(*topics: str) -> bytes:
    """A consumer's JoinGroup metadata: its version, then ConsumerProtocolSubscription v1."""
    return struct.pack(">h", 1) + M.DATA["ConsumerProtocolSubscription"].encode(
        1, M.ConsumerProtocolSubscription(topics=list(topics), owned_partitions=[]))


def _stable(n=2, **kw):
    s = Scenario()
    return s, s.stable_group(n, **kw)


def _completing(s: Scenario, members: list[str]) -> None:
    """Every member rejoins: the join phase ends, generation 2 waits for the leader's SyncGroup."""
    for i, m in enumerate(members):
        s.join(f"rejoin{i}", member_id=m)
    assert s.state() == "CompletingRebalance" and s.core.groups["g"].generation_id == 2


# ---- OffsetCommit, classic group: the order of the checks --------------------------------

def test_offset_commit_while_preparing_rebalance_is_stored_as_kafka_does():
    s, (leader, follower) = _stable(2)
    s.join("rl", member_id=leader)  # a rebalance starts; the follower commits in its revoke callback
    assert s.state() == "PreparingRebalance"
    assert s.commit([("t", 0, 7)], generation=1, member_id=follower) == [Error.NONE]
    assert s.committed() == {("t", 0): 7}


def test_offset_commit_while_completing_rebalance_is_rebalance_in_progress():
    s, members = _stable(2)
    _completing(s, members)
    assert s.commit([("t", 0, 7)], generation=2, member_id=members[1]) == [Error.REBALANCE_IN_PROGRESS]
    assert s.committed() == {}


def test_offset_commit_in_completing_rebalance_checks_generation_before_state():
    s, members = _stable(2)
    _completing(s, members)
    assert s.commit([("t", 0, 7)], generation=1, member_id=members[1]) == [Error.ILLEGAL_GENERATION]


def test_offset_commit_checks_member_before_generation():
    s, _ = _stable(2)
    assert s.commit([("t", 0, 7)], generation=5, member_id="ghost") == [Error.UNKNOWN_MEMBER_ID]


def test_offset_commit_from_previous_generation_during_preparing_rebalance_is_illegal_generation():
    s, (leader, follower) = _stable(2)
    s.join("rl", member_id=leader)
    assert s.commit([("t", 0, 7)], generation=0, member_id=follower) == [Error.ILLEGAL_GENERATION]


def test_offset_commit_of_a_static_member_fenced_by_a_newer_instance_is_fenced_instance_id():
    s, (leader, follower) = _stable(2, instance_id=None)
    s.join("static", instance_id="i1", member_id="")  # the group rebalances with a static member
    for i, m in enumerate((leader, follower)):
        s.join(f"r{i}", member_id=m)
    group = s.core.groups["g"]
    holder = group.static_members["i1"]
    # another process with the same group.instance.id and a stale member id
    assert s.commit([("t", 0, 1)], generation=group.generation_id, member_id=leader, instance_id="i1") == \
        [Error.FENCED_INSTANCE_ID]
    # fencing comes before the generation check
    assert s.commit([("t", 0, 1)], generation=99, member_id=leader, instance_id="i1") == \
        [Error.FENCED_INSTANCE_ID]
    assert s.commit([("t", 0, 1)], generation=99, member_id=holder, instance_id="nobody") == \
        [Error.UNKNOWN_MEMBER_ID]


def test_admin_offset_commit_to_an_empty_group_is_stored():
    s = Scenario()
    s.stable_group(1)
    (member,) = s.core.groups["g"].members
    s.leave((member, None))
    assert s.state() == "Empty"
    assert s.commit([("t", 0, 3)], generation=-1, member_id="") == [Error.NONE]
    assert s.committed() == {("t", 0): 3}


def test_admin_offset_commit_to_a_group_with_members_is_unknown_member_id():
    s, _ = _stable(2)
    assert s.commit([("t", 0, 3)], generation=-1, member_id="") == [Error.UNKNOWN_MEMBER_ID]
    s.join("rl", member_id=s.core.groups["g"].leader_id)  # in every non-Empty state
    assert s.commit([("t", 0, 3)], generation=-1, member_id="") == [Error.UNKNOWN_MEMBER_ID]
    assert s.committed() == {}


def test_offset_commit_to_a_dead_group_is_coordinator_not_available():
    s, (leader,) = _stable(1)
    s.core.groups["g"].state = DEAD  # deleted while the request was on its way
    assert s.commit([("t", 0, 3)], generation=1, member_id=leader) == [Error.COORDINATOR_NOT_AVAILABLE]


def test_offset_commit_during_preparing_rebalance_keeps_the_member_alive():
    s, (leader, follower) = _stable(2)
    s.join("rl", member_id=leader, rebalance_ms=60000)
    for _ in range(3):
        s.advance(8000)  # session timeout 10 s: the commits alone keep the follower in the group
        assert s.commit([("t", 0, 1)], generation=1, member_id=follower) == [Error.NONE]
    assert follower in s.core.groups["g"].members


# ---- OffsetCommit, consumer group (KIP-848) ------------------------------------------------

class _Cg:
    def __init__(self, **config):
        self.s = Scenario(consumer=ConsumerGroupConfig(**config))
        self.core = self.s.core

    def hb(self, member, epoch, topics=None, group="g"):
        req = R(group_id=group, member_id=member, member_epoch=epoch,
                rebalance_timeout_ms=30000 if epoch == 0 else -1, subscribed_topic_names=topics,
                topic_partitions=[])
        response, fx = self.core.consumer_group_heartbeat(req, 1, "client", "/127.0.0.1", TOPICS, self.s.now)
        self.s.run(fx)
        return response

    def commit(self, member, epoch, version=9, group="g"):
        errors, fx = self.core.commit_offsets(group, epoch, member, None, [("t1", 0, 4, -1, "")], version,
                                              self.s.now)
        self.s.run(fx)
        return errors[0]


def test_consumer_group_offset_commit_with_an_old_member_epoch_is_stale_member_epoch():
    cg = _Cg()
    epoch = cg.hb("a", 0, ["t1"]).member_epoch
    assert cg.commit("a", epoch - 1) == Error.STALE_MEMBER_EPOCH
    assert cg.commit("a", epoch) == Error.NONE


def test_consumer_group_offset_commit_below_v9_from_a_consumer_protocol_member_is_unsupported_version():
    cg = _Cg()
    epoch = cg.hb("a", 0, ["t1"]).member_epoch
    assert cg.commit("a", epoch, version=8) == Error.UNSUPPORTED_VERSION
    assert cg.commit("ghost", epoch, version=8) == Error.UNKNOWN_MEMBER_ID  # the member comes first


def test_consumer_group_offset_commit_from_an_unknown_member_is_unknown_member_id():
    cg = _Cg()
    cg.hb("a", 0, ["t1"])
    assert cg.commit("ghost", 1) == Error.UNKNOWN_MEMBER_ID
    assert cg.commit("", -1) == Error.UNKNOWN_MEMBER_ID  # the admin client, while it has members


def test_consumer_group_admin_offset_commit_when_empty_is_stored():
    cg = _Cg()
    cg.hb("a", 0, ["t1"])
    cg.hb("a", -1)  # leaves
    assert not cg.core.consumer.groups["g"].members
    assert cg.commit("", -1) == Error.NONE
    assert cg.s.committed() == {("t1", 0): 4}


# ---- OffsetDelete ----------------------------------------------------------------------------

def _delete(s: Scenario, topics, group="g", pending=()):
    code, answered, fx = s.core.delete_offsets(group, topics, pending)
    s.run(fx)
    return code, answered, fx


def test_offset_delete_of_an_unknown_group_is_group_id_not_found():
    s = Scenario()
    assert _delete(s, [("t", [0])])[:2] == (Error.GROUP_ID_NOT_FOUND, [])


def test_offset_delete_refuses_topics_a_classic_consumer_group_subscribes_to():
    s, (leader, follower) = _stable(2, protocols=[("range", _subscription("t"))])
    s.commit([("t", 0, 1), ("t", 1, 2), ("u", 0, 3)], generation=1, member_id=leader)
    code, answered, fx = _delete(s, [("t", [0, 1]), ("u", [0, 5])])
    assert code == Error.NONE
    assert answered == [("t", [(0, Error.GROUP_SUBSCRIBED_TO_TOPIC), (1, Error.GROUP_SUBSCRIBED_TO_TOPIC)]),
                        ("u", [(0, Error.NONE), (5, Error.NONE)])]
    (_, records), = fx.appends  # a tombstone for the offset that exists, none for u-5
    assert len(records) == 1 and records[0][1] is None
    assert s.committed() == {("t", 0): 1, ("t", 1): 2}


def test_offset_delete_on_a_non_empty_group_of_another_protocol_type_is_non_empty_group():
    s, (leader,) = _stable(1, protocol_type="connect")
    s.commit([("t", 0, 1)], generation=1, member_id=leader)
    code, answered, fx = _delete(s, [("t", [0])])
    assert (code, answered, fx.appends) == (Error.NON_EMPTY_GROUP, [], [])
    assert s.committed() == {("t", 0): 1}


def test_offset_delete_on_an_empty_group_deletes_the_offsets():
    s = Scenario()
    s.commit([("t", 0, 1), ("t", 1, 2)])  # a simple group
    code, answered, _ = _delete(s, [("t", [0, 1])])
    assert (code, answered) == (Error.NONE, [("t", [(0, Error.NONE), (1, Error.NONE)])])
    assert s.committed() == {}
    assert s.state() == "Empty"  # the group stays; retention deletes it later


def test_offset_delete_writes_a_tombstone_for_an_offset_not_committed_yet():
    s = Scenario()
    s.commit([("t", 0, 1)])
    _, _, fx = _delete(s, [("t", [0, 1])], pending=[("g", "t", 1), ("other", "t", 0)])
    (_, records), = fx.appends
    assert len(records) == 2


def test_offset_delete_refuses_topics_a_consumer_group_subscribes_to():
    cg = _Cg()
    epoch = cg.hb("a", 0, ["t1"]).member_epoch
    cg.s.run(cg.core.commit_offsets("g", epoch, "a", None, [("t1", 0, 4, -1, ""), ("old", 0, 2, -1, "")],
                                    9, 0)[1])
    code, answered, _ = _delete(cg.s, [("t1", [0]), ("old", [0])])
    assert (code, answered) == (Error.NONE, [("t1", [(0, Error.GROUP_SUBSCRIBED_TO_TOPIC)]),
                                             ("old", [(0, Error.NONE)])])
    assert cg.s.committed() == {("t1", 0): 4}


# ---- group configs (KIP-848) -------------------------------------------------------------------

def test_group_config_heartbeat_interval_overrides_the_brokers_for_that_group_only():
    cg = _Cg(heartbeat_interval_ms=5000)
    cg.core.consumer.group_configs = {"g": {"consumer.heartbeat.interval.ms": "7000"}}
    assert cg.hb("a", 0, ["t1"]).heartbeat_interval_ms == 7000
    assert cg.hb("b", 0, ["t1"], group="other").heartbeat_interval_ms == 5000


def test_group_config_session_timeout_sets_the_members_deadline():
    cg = _Cg(session_timeout_ms=45000)
    cg.core.consumer.group_configs = {"g": {"consumer.session.timeout.ms": "20000"}}
    cg.hb("a", 0, ["t1"])
    cg.s.advance(19999)
    assert "a" in cg.core.consumer.groups["g"].members
    cg.s.advance(1)
    assert "a" not in cg.core.consumer.groups["g"].members  # fenced at the group's 20 s, not 45 s


def test_group_config_change_applies_from_the_next_heartbeat():
    cg = _Cg(session_timeout_ms=45000, heartbeat_interval_ms=5000)
    epoch = cg.hb("a", 0, ["t1"]).member_epoch
    cg.core.consumer.group_configs = {"g": {"consumer.session.timeout.ms": "10000",
                                            "consumer.heartbeat.interval.ms": "2000"}}
    assert cg.hb("a", epoch).heartbeat_interval_ms == 2000
    cg.s.advance(10000)
    assert "a" not in cg.core.consumer.groups["g"].members
    cg.core.consumer.group_configs = {}  # removed: the broker's again
    assert cg.hb("b", 0, ["t1"]).heartbeat_interval_ms == 5000
