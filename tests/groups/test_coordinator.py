"""The classic group state machine under a clock the test controls: one test per rule."""
from protocol.errors import Error
from tests.groups.scenario import PROTOCOLS, Scenario


def _stable(n=2, **kw):
    s = Scenario(**kw)
    return s, s.stable_group(n)


# ---- JoinGroup ---------------------------------------------------------------------------

def test_join_v4_without_member_id_gets_member_id_required():
    s = Scenario()
    r = s.join("j1", version=4, client_id="cons")
    assert r.error_code == Error.MEMBER_ID_REQUIRED
    assert r.member_id.startswith("cons-") and r.generation_id == -1
    assert s.core.groups["g"].pending_members  # reserved until it joins with it


def test_join_v3_without_member_id_joins_at_once():
    s = Scenario()
    s.join("j1", version=3)
    s.advance(0)
    r = s.replies["j1"]
    assert r.error_code == Error.NONE and r.generation_id == 1 and r.leader == r.member_id
    assert s.state() == "CompletingRebalance"


def test_unanswered_member_id_required_expires_after_session_timeout():
    s = Scenario()
    s.join("j1", session_ms=6000)
    s.advance(6000)
    assert not s.core.groups["g"].pending_members


def test_initial_rebalance_delay_waits_for_more_members():
    s = Scenario(initial_delay_ms=3000)
    a, _ = s.join_new("a")
    s.advance(2000)
    b, _ = s.join_new("b")
    s.advance(1000)  # first slice over, but a member arrived in it: another slice
    assert "a" not in s.replies and s.state() == "PreparingRebalance"
    s.advance(3000)
    assert s.replies["a"].generation_id == s.replies["b"].generation_id == 1
    assert {m.member_id for m in s.replies["a"].members} == {a, b}  # a leads
    assert s.replies["b"].members == []


def test_join_completes_when_all_known_members_rejoin():
    s, (leader, follower) = _stable(2)
    c, _ = s.join_new("c")
    assert s.state() == "PreparingRebalance" and "c" not in s.replies
    s.join("rl", member_id=leader)
    assert "c" not in s.replies  # the follower has not rejoined yet
    s.join("rf", member_id=follower)
    assert s.state() == "CompletingRebalance"
    assert {s.replies[w].generation_id for w in ("c", "rl", "rf")} == {2}
    assert {m.member_id for m in s.replies["rl"].members} == {leader, follower, c}


def test_rebalance_timeout_removes_members_that_did_not_rejoin():
    s, (leader, follower) = _stable(2)
    s.join("rl", member_id=leader, rebalance_ms=20000)  # the group's timeout: the largest, 30 s
    for _ in range(5):
        s.advance(5000)
        assert s.heartbeat(follower, 1) == Error.REBALANCE_IN_PROGRESS  # alive, but not rejoining
    s.advance(4999)
    assert "rl" not in s.replies
    s.advance(1)
    assert s.replies["rl"].error_code == Error.NONE and s.replies["rl"].generation_id == 2
    assert list(s.core.groups["g"].members) == [leader]


def test_stable_follower_rejoining_with_same_metadata_gets_current_generation():
    s, (leader, follower) = _stable(2)
    r = s.join("rf", member_id=follower)
    assert r.error_code == Error.NONE and r.generation_id == 1 and s.state() == "Stable"


def test_stable_leader_rejoin_triggers_rebalance():
    s, (leader, follower) = _stable(2)
    s.join("rl", member_id=leader)
    assert s.state() == "PreparingRebalance"


def test_protocol_selected_by_vote():
    s = Scenario()
    s.join("a", version=3, protocols=[("roundrobin", b""), ("range", b"")])
    s.join("b", version=3, protocols=[("range", b""), ("roundrobin", b"")])
    s.join("c", version=3, protocols=[("range", b""), ("roundrobin", b"")])
    s.advance(0)
    assert s.replies["a"].protocol_name == "range"


def test_join_with_no_common_protocol_is_inconsistent_group_protocol():
    s, _ = _stable(1)
    r = s.join("x", version=3, protocols=[("sticky", b"")])
    assert r.error_code == Error.INCONSISTENT_GROUP_PROTOCOL
    r = s.join("y", version=3, protocol_type="connect")
    assert r.error_code == Error.INCONSISTENT_GROUP_PROTOCOL


def test_join_with_session_timeout_out_of_bounds_is_invalid_session_timeout():
    s = Scenario()
    assert s.join("j", session_ms=10).error_code == Error.INVALID_SESSION_TIMEOUT
    assert "g" not in s.core.groups


def test_join_unknown_member_of_unknown_group_is_unknown_member_id():
    s = Scenario()
    assert s.join("j", member_id="ghost").error_code == Error.UNKNOWN_MEMBER_ID


def test_join_when_not_coordinator():
    s = Scenario(partitions=2)
    s.core.unload(1)
    group = next(g for g in ("g1", "g2", "g3", "g4") if s.core.partition_for(g) == 1)
    assert s.join("j", group=group).error_code == Error.NOT_COORDINATOR
    s.core.begin_load(1)
    assert s.join("k", group=group).error_code == Error.COORDINATOR_LOAD_IN_PROGRESS


def test_group_max_size_reached():
    s = Scenario(max_size=1)
    s.stable_group(1)
    assert s.join("x", version=4).error_code == Error.GROUP_MAX_SIZE_REACHED


# ---- SyncGroup ---------------------------------------------------------------------------

def test_sync_followers_wait_for_the_leaders_assignment():
    s = Scenario()
    a, _ = s.join_new("a")
    b, _ = s.join_new("b")
    s.advance(0)
    leader = s.replies["a"].leader
    follower = b if leader == a else a
    assert s.sync("sf", follower, 1) is None  # parked
    r = s.sync("sl", leader, 1, {leader: b"L", follower: b"F"})
    assert r.assignment == b"L" and s.replies["sf"].assignment == b"F"
    assert s.state() == "Stable"
    partition, records = s.appended[-1]
    assert len(records) == 1 and records[0][0][:2] == b"\x00\x02"  # a GroupMetadata record


def test_sync_with_stale_generation_is_illegal_generation():
    s, (leader,) = _stable(1)
    assert s.sync("s", leader, 0).error_code == Error.ILLEGAL_GENERATION


def test_sync_during_preparing_rebalance_is_rebalance_in_progress():
    s, (leader, follower) = _stable(2)
    s.join("rl", member_id=leader)
    assert s.sync("s", follower, 1).error_code == Error.REBALANCE_IN_PROGRESS


def test_rebalance_during_completing_rebalance_fails_parked_syncs():
    s = Scenario()
    a, _ = s.join_new("a")
    b, _ = s.join_new("b")
    s.advance(0)
    follower = b if s.replies["a"].leader == a else a
    s.sync("sf", follower, 1)
    s.join_new("c")
    assert s.replies["sf"].error_code == Error.REBALANCE_IN_PROGRESS


def test_members_that_never_sync_are_removed_after_the_rebalance_timeout():
    s = Scenario()
    a, _ = s.join_new("a", rebalance_ms=20000)
    b, _ = s.join_new("b", rebalance_ms=20000)
    s.advance(0)
    leader = s.replies["a"].leader
    follower = b if leader == a else a
    s.sync("sl", leader, 1, {a: b"A", b: b"B"})
    for _ in range(3):
        s.advance(5000)
        assert s.heartbeat(leader, 1) == s.heartbeat(follower, 1) == Error.NONE
    s.advance(4999)
    assert s.state() == "Stable"
    s.advance(1)  # 20 s after the join phase: the follower never sent SyncGroup
    assert list(s.core.groups["g"].members) == [leader]
    assert s.state() in ("PreparingRebalance", "CompletingRebalance")


# ---- Heartbeat ---------------------------------------------------------------------------

def test_heartbeat_in_stable_group_is_none():
    s, (leader, _) = _stable(2)
    assert s.heartbeat(leader, 1) == Error.NONE


def test_heartbeat_during_rebalance_is_rebalance_in_progress():
    s, (leader, follower) = _stable(2)
    s.join("rl", member_id=leader)
    assert s.heartbeat(follower, 1) == Error.REBALANCE_IN_PROGRESS


def test_heartbeat_errors():
    s, (leader,) = _stable(1)
    assert s.heartbeat("ghost", 1) == Error.UNKNOWN_MEMBER_ID
    assert s.heartbeat(leader, 7) == Error.ILLEGAL_GENERATION
    assert s.heartbeat(leader, 1, group="nope") == Error.UNKNOWN_MEMBER_ID


def test_session_timeout_removes_member_and_rebalances():
    s, (leader, follower) = _stable(2)
    for _ in range(3):
        s.advance(5000)
        s.heartbeat(leader, 1)
    assert follower not in s.core.groups["g"].members
    assert s.state() == "PreparingRebalance"
    assert s.heartbeat(leader, 1) == Error.REBALANCE_IN_PROGRESS
    s.join("rl", member_id=leader)  # the only member left has rejoined: done at once
    assert s.replies["rl"].generation_id == 2 and s.state() == "CompletingRebalance"


def test_the_log_says_which_member_expired_and_why_the_group_rebalanced():
    s, (leader, follower) = _stable(2)
    s.events.clear()
    for _ in range(3):
        s.advance(5000)
        s.heartbeat(leader, 1)
    assert s.events == [
        f"group g: member {follower}: no heartbeat within its session timeout (10000 ms); removing it",
        f"preparing to rebalance group g in state Stable with old generation 1 (member {follower}: no "
        "heartbeat within its session timeout (10000 ms))"]
    s.join("rl", member_id=leader)
    assert s.events[-1] == f"group g: generation 2 (range) with 1 members, leader {leader}"
    s.sync("sl", leader, 2, {leader: b"a"})
    assert s.events[-1] == f"group g: generation 2 is stable with the assignment of leader {leader}"


def test_members_parked_in_join_do_not_expire():
    s, (leader, follower) = _stable(2)
    s.join("rl", member_id=leader, rebalance_ms=60000)
    for _ in range(6):  # 30 s, three session timeouts, without a heartbeat from the leader
        s.advance(5000)
        s.heartbeat(follower, 1)
    assert leader in s.core.groups["g"].members and "rl" not in s.replies


# ---- static membership -------------------------------------------------------------------

def _static_group(s):
    ids = {}
    for name in ("i1", "i2"):
        r = s.join("j-" + name, instance_id=name)
        ids[name] = r.member_id if r else None
    s.advance(0)
    ids = {name: s.replies["j-" + name].member_id for name in ("i1", "i2")}
    leader = s.replies["j-i1"].leader
    s.sync("sl", leader, 1, {m: name.encode() for name, m in ids.items()},
           instance_id=next(n for n, m in ids.items() if m == leader))
    other = next(n for n, m in ids.items() if m != leader)
    s.sync("so", ids[other], 1, instance_id=other)
    assert s.state() == "Stable"
    return ids


def test_static_member_rejoin_keeps_assignment_without_rebalance():
    s = Scenario()
    ids = _static_group(s)
    r = s.join("again", instance_id="i2")  # restarted: no member id
    assert r.error_code == Error.NONE and r.member_id != ids["i2"] and r.generation_id == 1
    assert s.state() == "Stable"
    assert s.sync("s2", r.member_id, 1, instance_id="i2").assignment == b"i2"
    assert s.core.groups["g"].members[r.member_id].assignment == b"i2"


def test_static_member_old_member_id_is_fenced():
    s = Scenario()
    ids = _static_group(s)
    s.join("again", instance_id="i2")
    assert s.heartbeat(ids["i2"], 1, instance_id="i2") == Error.FENCED_INSTANCE_ID


def test_static_member_is_not_removed_when_it_misses_a_rebalance():
    s = Scenario()
    ids = _static_group(s)
    leader = s.core.groups["g"].leader_id
    other = next(n for n, m in ids.items() if m != leader)
    s.join("rl", member_id=leader, instance_id=next(n for n, m in ids.items() if m == leader))
    for _ in range(6):  # the other member heartbeats but does not rejoin
        s.advance(5000)
        s.heartbeat(ids[other], 1, instance_id=other)
    assert s.replies["rl"].generation_id == 2
    assert set(s.core.groups["g"].members) == set(ids.values())


# ---- LeaveGroup --------------------------------------------------------------------------

def test_leave_group_triggers_rebalance():
    s, (leader, follower) = _stable(2)
    code, errors = s.leave((follower, None))
    assert (code, errors) == (Error.NONE, [Error.NONE])
    assert s.state() == "PreparingRebalance"
    s.join("rl", member_id=leader)
    assert s.replies["rl"].generation_id == 2


def test_leave_group_batch_v3_with_per_member_errors():
    s = Scenario()
    ids = _static_group(s)
    code, errors = s.leave(("", "i1"), (ids["i1"], "i2"), ("ghost", None), ("", "i9"))
    assert code == Error.NONE
    assert errors == [Error.NONE, Error.FENCED_INSTANCE_ID, Error.UNKNOWN_MEMBER_ID, Error.UNKNOWN_MEMBER_ID]


def test_last_member_leaving_empties_the_group():
    s, (leader,) = _stable(1)
    s.leave((leader, None))
    assert s.state() == "Empty" and s.core.groups["g"].generation_id == 2
    assert s.appended[-1][1][0][0][:2] == b"\x00\x02"  # the empty group is stored


def test_leave_unknown_group():
    s = Scenario()
    assert s.leave(("m", None), group="nope") == (Error.NONE, [Error.UNKNOWN_MEMBER_ID])


# ---- OffsetCommit / OffsetFetch ----------------------------------------------------------

def test_standalone_commit_creates_a_simple_group():
    s = Scenario()
    assert s.commit([("t", 0, 5)]) == [Error.NONE]
    assert s.committed() == {("t", 0): 5}
    assert s.state() == "Empty" and s.core.groups["g"].protocol_type == ""


def test_commit_by_member_with_current_generation():
    s, (leader, _) = _stable(2)
    assert s.commit([("t", 0, 10), ("t", 1, 11)], generation=1, member_id=leader) == [Error.NONE] * 2
    assert s.committed() == {("t", 0): 10, ("t", 1): 11}


def test_offset_commit_with_stale_generation_is_illegal_generation():
    s, (leader, _) = _stable(2)
    assert s.commit([("t", 0, 10)], generation=0, member_id=leader) == [Error.ILLEGAL_GENERATION]
    assert s.committed() == {}


def test_commit_from_unknown_member_is_unknown_member_id():
    s, _ = _stable(2)
    assert s.commit([("t", 0, 10)], generation=1, member_id="ghost") == [Error.UNKNOWN_MEMBER_ID]


def test_standalone_commit_to_active_group_is_rejected():
    s, _ = _stable(2)
    assert s.commit([("t", 0, 1)]) == [Error.UNKNOWN_MEMBER_ID]


def test_commit_while_preparing_rebalance_is_stored():
    s, (leader, follower) = _stable(2)
    s.join("rl", member_id=leader)
    assert s.commit([("t", 0, 1)], generation=1, member_id=follower) == [Error.NONE]


def test_commit_with_generation_to_unknown_group():
    s = Scenario()
    assert s.commit([("t", 0, 1)], group="x", generation=3, member_id="m") == [Error.ILLEGAL_GENERATION]
    assert s.commit([("t", 0, 1)], group="x", generation=3, member_id="m", version=9) == \
        [Error.GROUP_ID_NOT_FOUND]


def test_commit_with_too_large_metadata():
    s = Scenario(offset_metadata_max_bytes=2)
    assert s.commit([("t", 0, 1)]) == [Error.OFFSET_METADATA_TOO_LARGE]


def test_fetch_offsets_of_some_and_all_partitions():
    s = Scenario()
    s.commit([("t", 0, 5), ("u", 2, 9)])
    code, topics = s.core.fetch_offsets("g", [("t", [0, 1])])
    assert code == Error.NONE
    assert [(p, om.offset if om else None) for p, om in topics[0][1]] == [(0, 5), (1, None)]
    code, topics = s.core.fetch_offsets("g", None)
    assert [(t, [(p, om.offset) for p, om in parts]) for t, parts in topics] == \
        [("t", [(0, 5)]), ("u", [(2, 9)])]
    assert s.core.fetch_offsets("nope", None) == (Error.NONE, [])


# ---- admin -------------------------------------------------------------------------------

def test_describe_stable_group_shows_metadata_and_assignments():
    s, (leader, follower) = _stable(2)
    d = s.core.describe_group("g")
    assert (d.group_state, d.protocol_type, d.protocol_data) == ("Stable", "consumer", "range")
    by_id = {m.member_id: m for m in d.members}
    assert by_id[leader].member_assignment == leader.encode()
    assert by_id[leader].member_metadata == PROTOCOLS[0][1]
    assert s.core.describe_group("nope") is None


def test_list_groups_with_states_filter():
    s, _ = _stable(1)
    s.commit([("t", 0, 1)], group="simple")
    assert sorted(s.core.list_groups([])) == [("g", "consumer", "Stable"), ("simple", "", "Empty")]
    assert s.core.list_groups(["empty"]) == [("simple", "", "Empty")]


def test_delete_non_empty_group_fails():
    s, _ = _stable(1)
    errors, fx = s.core.delete_groups(["g"], s.now)
    assert errors == [Error.NON_EMPTY_GROUP] and not fx.appends


def test_delete_empty_group_writes_tombstones():
    s = Scenario()
    s.commit([("t", 0, 5), ("t", 1, 6)])
    errors, fx = s.core.delete_groups(["g", "nope"], s.now)
    s.run(fx)
    assert errors == [Error.NONE, Error.GROUP_ID_NOT_FOUND]
    (_, records), = fx.appends
    assert len(records) == 3 and all(v is None for _, v in records)
    assert s.committed() == {} and "g" not in s.core.groups


def test_unload_answers_parked_requests_with_not_coordinator():
    s = Scenario()
    s.join("a", version=3)
    fx = s.core.unload(0)
    s.run(fx)
    assert s.replies["a"].error_code == Error.NOT_COORDINATOR and not s.core.groups
