"""The consumer group protocol (KIP-848) under a clock the test controls: one test per rule."""
from broker.groups.consumer_group import (
    MEMBER_STABLE,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    ConsumerGroupConfig,
    assign_range,
    assign_uniform,
)
from broker.groups.coordinator import CoordinatorConfig
from protocol import messages as M
from protocol.errors import Error
from tests.groups.scenario import Scenario

T1, T2 = b"\x01" * 16, b"\x02" * 16
TOPICS = {"t1": (T1, 6), "t2": (T2, 2)}
R = M.ConsumerGroupHeartbeatRequest


class Cg:
    """Heartbeats as a librdkafka member sends them; ``owned`` is what each member reports."""

    def __init__(self, session_ms: int = 45000, **config):
        self.s = Scenario(consumer=ConsumerGroupConfig(session_timeout_ms=session_ms), **config)
        self.topics = dict(TOPICS)
        self.epoch: dict[str, int] = {}
        self.owned: dict[str, dict[bytes, list[int]]] = {}

    @property
    def core(self):
        return self.s.core

    def group(self, group: str = "g"):
        return self.core.consumer.groups[group]

    def hb(self, member: str, epoch: int | None = None, topics=None, owned="same", group: str = "g",
           rebalance_ms: int = -1, version: int = 1, **fields):
        epoch = self.epoch.get(member, 0) if epoch is None else epoch
        if owned == "same":
            owned = self.owned.get(member, {})
        tps = None if owned is None else \
            [R.TopicPartitions(topic_id=t, partitions=ps) for t, ps in owned.items()]
        req = R(group_id=group, member_id=member, member_epoch=epoch, rebalance_timeout_ms=rebalance_ms,
                subscribed_topic_names=topics, topic_partitions=tps, **fields)
        response, fx = self.core.consumer_group_heartbeat(req, version, "client", "/127.0.0.1", self.topics,
                                                          self.s.now)
        self.s.run(fx)
        if response.error_code == Error.NONE and epoch >= 0:
            self.epoch[member] = response.member_epoch
            if response.assignment is not None:
                # The member revokes and takes what the response says at once, as librdkafka does.
                self.owned[member] = {t.topic_id: sorted(t.partitions)
                                      for t in response.assignment.topic_partitions}
        return response

    def join(self, member: str, topics=("t1",), **kw):
        return self.hb(member, epoch=0, topics=list(topics), owned={}, rebalance_ms=30000, **kw)

    def converge(self, *members, rounds: int = 6):
        for _ in range(rounds):
            for m in members:
                self.hb(m)

    def assigned(self, member: str) -> dict:
        m = self.group().members[member]
        return {t: sorted(ps) for t, ps in m.assigned.items()}


def _all_owned_once(cg: Cg, members) -> bool:
    flat = [(t, p) for m in members for t, ps in cg.assigned(m).items() for p in ps]
    return len(flat) == len(set(flat))


# ---- joining and epochs --------------------------------------------------------------------

def test_first_member_gets_every_subscribed_partition_and_epoch_one():
    cg = Cg()
    r = cg.join("a")
    assert r.error_code == Error.NONE and r.member_epoch == 1 and r.member_id == "a"
    assert r.heartbeat_interval_ms == 5000
    assert {t.topic_id: sorted(t.partitions) for t in r.assignment.topic_partitions} == {T1: list(range(6))}
    assert cg.group().state == "Stable"


def test_group_epoch_bumps_on_join_and_subscription_change():
    cg = Cg()
    cg.join("a")
    assert cg.group().group_epoch == 1
    cg.hb("a")  # an unchanged heartbeat changes nothing
    assert cg.group().group_epoch == 1
    cg.hb("a", topics=["t1", "t2"])
    assert cg.group().group_epoch == 2 and cg.group().assignment_epoch == 2
    assert cg.assigned("a") == {T1: list(range(6)), T2: [0, 1]}


def test_group_epoch_bumps_when_a_subscribed_topic_grows():
    cg = Cg()
    cg.join("a")
    cg.topics["t1"] = (T1, 8)
    r = cg.hb("a")
    assert cg.group().group_epoch == 2 and r.member_epoch == 2
    assert cg.assigned("a") == {T1: list(range(8))}


def test_subscription_to_a_missing_topic_assigns_it_once_created():
    cg = Cg()
    r = cg.join("a", topics=["later"])
    assert r.assignment.topic_partitions == []
    cg.topics["later"] = (b"\x09" * 16, 2)
    cg.hb("a")
    assert cg.assigned("a") == {b"\x09" * 16: [0, 1]}


# ---- revocation before assignment ----------------------------------------------------------

def test_new_member_gets_partitions_only_after_previous_owner_revokes():
    cg = Cg()
    cg.join("a")
    r = cg.join("b")
    # b's target is half of t1, but a still owns it: b gets the new epoch and nothing yet.
    assert r.member_epoch == 2 and r.assignment.topic_partitions == []
    assert cg.group().members["b"].state == UNRELEASED_PARTITIONS
    # a heartbeats without reporting what it owns: it must keep waiting for the revocation.
    r = cg.hb("a", owned=None)
    a = cg.group().members["a"]
    assert a.state == UNREVOKED_PARTITIONS and a.member_epoch == 1 and r.member_epoch == 1
    given_to_b = set(cg.group().targets["b"][T1])
    assert set(a.pending_revocation[T1]) == given_to_b
    assert cg.hb("b").assignment is None and cg.assigned("b") == {}  # still owned by a
    # a reports it revoked them (the response left them out): it gets the new epoch ...
    r = cg.hb("a")
    assert r.member_epoch == 2 and cg.group().members["a"].state == MEMBER_STABLE
    # ... and only now are they b's.
    r = cg.hb("b")
    assert sorted(r.assignment.topic_partitions[0].partitions) == sorted(given_to_b)
    assert cg.group().state == "Stable" and _all_owned_once(cg, "ab")


def test_a_partition_is_never_owned_by_two_members_while_converging():
    cg = Cg()
    members = ["a", "b", "c", "d"]
    for m in members:
        cg.join(m, topics=("t1", "t2"))
        for _ in range(3):
            for x in members[:members.index(m) + 1]:
                cg.hb(x)
                assert _all_owned_once(cg, members[:members.index(m) + 1])
    assert cg.group().state == "Stable"
    assert sorted(sum(len(ps) for ps in cg.assigned(m).values()) for m in members) == [2, 2, 2, 2]


def test_previous_epoch_is_accepted_when_owned_partitions_are_a_subset():
    cg = Cg()
    cg.join("a")
    cg.hb("a", topics=["t1", "t2"])  # epoch 2; suppose that response was lost
    r = cg.hb("a", epoch=1, owned={T1: [0, 1]})
    assert r.error_code == Error.NONE and r.member_epoch == 2


def test_wrong_member_epoch_is_fenced():
    cg = Cg()
    cg.join("a")
    assert cg.hb("a", epoch=5).error_code == Error.FENCED_MEMBER_EPOCH
    cg.hb("a", topics=["t1", "t2"])
    assert cg.hb("a", epoch=1, owned={b"\x07" * 16: [0]}).error_code == Error.FENCED_MEMBER_EPOCH
    assert cg.hb("nobody", epoch=3).error_code == Error.UNKNOWN_MEMBER_ID


def test_member_that_does_not_revoke_within_rebalance_timeout_is_fenced():
    cg = Cg()
    cg.join("a")
    cg.join("b")
    cg.hb("a", owned=None)
    assert cg.group().members["a"].state == UNREVOKED_PARTITIONS
    cg.s.advance(30000)
    assert "a" not in cg.group().members
    r = cg.hb("b")
    assert r.member_epoch == cg.group().group_epoch and cg.assigned("b") == {T1: list(range(6))}


# ---- leaving and sessions ------------------------------------------------------------------

def test_leaving_member_partitions_go_to_the_others():
    cg = Cg()
    for m in "abc":
        cg.join(m)
    cg.converge("a", "b", "c")
    before = {m: cg.assigned(m)[T1] for m in "abc"}
    r = cg.hb("b", epoch=-1)
    assert r.error_code == Error.NONE and r.member_epoch == -1
    assert "b" not in cg.group().members
    cg.converge("a", "c")
    after = {m: cg.assigned(m)[T1] for m in "ac"}
    assert sorted(after["a"] + after["c"]) == list(range(6))
    assert set(before["a"]) <= set(after["a"]) and set(before["c"]) <= set(after["c"])  # sticky


def test_session_timeout_fences_member_and_reassigns():
    cg = Cg(session_ms=10000)
    cg.join("a")
    cg.join("b")
    cg.converge("a", "b")
    cg.s.advance(6000)
    cg.hb("a")
    cg.s.advance(6000)  # b's session ran out; a's did not
    assert set(cg.group().members) == {"a"}
    cg.converge("a")
    assert cg.assigned("a") == {T1: list(range(6))}
    assert cg.hb("b").error_code == Error.UNKNOWN_MEMBER_ID


def test_fenced_member_rejoins_with_epoch_zero():
    cg = Cg()
    cg.join("a")
    r = cg.join("a")  # librdkafka rejoins with the same member id after FENCED_MEMBER_EPOCH
    assert r.error_code == Error.NONE and r.member_epoch == 3
    assert cg.assigned("a") == {T1: list(range(6))}


# ---- validation --------------------------------------------------------------------------------

def test_invalid_heartbeats_are_rejected():
    cg = Cg()
    assert cg.hb("", epoch=0, topics=["t1"], owned={}, rebalance_ms=1).error_code == Error.INVALID_REQUEST
    assert cg.hb("a", epoch=0, topics=["t1"], owned={}).error_code == Error.INVALID_REQUEST  # no timeout
    assert cg.hb("a", epoch=0, topics=["t1"], owned=None, rebalance_ms=1).error_code == Error.INVALID_REQUEST
    assert cg.join("a", server_assignor="sticky").error_code == Error.UNSUPPORTED_ASSIGNOR
    assert "g" not in cg.core.consumer.groups and not cg.s.appended


def test_classic_and_consumer_groups_do_not_mix():
    cg = Cg()
    cg.join("a")
    jr = cg.s.join("j1", group="g")
    assert jr.error_code == Error.INCONSISTENT_GROUP_PROTOCOL
    cg.s.join_new("c1", group="classic")
    assert cg.join("x", group="classic").error_code == Error.GROUP_ID_NOT_FOUND


# ---- assignors -----------------------------------------------------------------------------

def test_uniform_assignor_is_balanced_and_sticky():
    subs = {"a": {"t1"}, "b": {"t1"}, "c": {"t1"}}
    first = assign_uniform(subs, {"t1": (T1, 7)}, {})
    assert sorted(len(first[m][T1]) for m in subs) == [2, 2, 3]
    assert assign_uniform(subs, {"t1": (T1, 7)}, first) == first  # nothing changed: same answer
    second = assign_uniform({"a": {"t1"}, "c": {"t1"}}, {"t1": (T1, 7)}, first)
    assert first["a"][T1] <= second["a"][T1] and first["c"][T1] <= second["c"][T1]


def test_uniform_assignor_respects_heterogeneous_subscriptions():
    out = assign_uniform({"a": {"t1", "t2"}, "b": {"t2"}}, TOPICS, {})
    assert out["a"] == {T1: set(range(6))} and out["b"] == {T2: {0, 1}}


def test_range_assignor_gives_contiguous_ranges_per_topic():
    out = assign_range({"a": {"t1"}, "b": {"t1", "t2"}}, TOPICS, {})
    assert out == {"a": {T1: {0, 1, 2}}, "b": {T1: {3, 4, 5}, T2: {0, 1}}}


# ---- offsets -------------------------------------------------------------------------------

def test_offset_commit_needs_the_current_member_epoch():
    cg = Cg()
    cg.join("a")
    commit = [("t1", 0, 10, -1, "")]
    errors, _ = cg.core.commit_offsets("g", 1, "a", None, commit, 9, cg.s.now)
    assert errors == [Error.NONE]
    errors, _ = cg.core.commit_offsets("g", 7, "a", None, commit, 9, cg.s.now)
    assert errors == [Error.STALE_MEMBER_EPOCH]
    errors, _ = cg.core.commit_offsets("g", -1, "", None, commit, 9, cg.s.now)
    assert errors == [Error.UNKNOWN_MEMBER_ID]  # only an empty group takes admin commits
    assert cg.core.fetch_offsets("g", None, "a", 7)[0] == Error.STALE_MEMBER_EPOCH
    assert cg.core.fetch_offsets("g", None, "a", 1)[0] == Error.NONE


# ---- persistence ---------------------------------------------------------------------------

def test_reloaded_group_keeps_epochs_members_and_assignments():
    cg = Cg()
    cg.join("a")
    cg.join("b")
    cg.converge("a", "b")
    cg.hb("a", owned=None)
    state = cg.s.replayed()
    reloaded = Scenario(consumer=ConsumerGroupConfig()).core
    reloaded.complete_load(0, state, 0)
    old, new = cg.group(), reloaded.consumer.groups["g"]
    assert (new.group_epoch, new.assignment_epoch) == (old.group_epoch, old.assignment_epoch)
    assert new.targets == old.targets and new.owners == old.owners
    for m in "ab":
        o, n = old.members[m], new.members[m]
        assert (n.member_epoch, n.state, n.assigned, n.subscribed_topic_names) == \
            (o.member_epoch, o.state, o.assigned, o.subscribed_topic_names)
    assert "g" not in reloaded.groups  # not a classic group too


def test_deleting_an_empty_consumer_group_writes_tombstones():
    cg = Cg()
    cg.join("a")
    assert cg.core.delete_groups(["g"], 0)[0] == [Error.NON_EMPTY_GROUP]
    cg.hb("a", epoch=-1)
    errors, fx = cg.core.delete_groups(["g"], 0)
    cg.s.run(fx)
    assert errors == [Error.NONE] and "g" not in cg.core.consumer.groups
    state = cg.s.replayed()
    assert state.consumer_groups == {}


def test_coordinator_config_defaults_match_kafka():
    c = CoordinatorConfig().consumer
    assert (c.session_timeout_ms, c.heartbeat_interval_ms) == (45000, 5000)
