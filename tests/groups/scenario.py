"""A small DSL for driving the group coordinator core under a clock the test controls.

Waiters are plain strings chosen by the test ("j1", "s2"); replies land in ``replies``,
appended records in ``appended`` (and are applied, as the shell does).
"""
from __future__ import annotations

import random

from broker.groups import storage
from broker.groups.coordinator import CoordinatorConfig, Effects, GroupCoordinator
from protocol import messages as M

PROTOCOLS = [("range", b"sub-range"), ("roundrobin", b"sub-rr")]


class Scenario:
    def __init__(self, initial_delay_ms: int = 0, partitions: int = 1, **config):
        self.core = GroupCoordinator(CoordinatorConfig(initial_rebalance_delay_ms=initial_delay_ms, **config),
                                     random.Random(7))
        self.core.num_partitions = partitions
        for p in range(partitions):
            self.core.complete_load(p, storage.GroupState(), 0)
        self.now = 0
        self.replies: dict[str, object] = {}
        self.appended: list[tuple[int, list]] = []
        self.events: list[str] = []  # what the shell logs
        self.log_end = 0  # the offset the next applied batch starts at, as in the log

    def apply(self, records, producer_id: int = -1) -> None:
        """Apply one batch as the shell does once it is committed, at the next log offsets."""
        self.core.apply_batch(storage.LogBatch([(self.log_end + i, key, value)
                                                for i, (key, value) in enumerate(records)], producer_id),
                              self.now)
        self.log_end += len(records)

    def replayed(self) -> storage.GroupState:
        """What a coordinator loading the partition replays: the appended records, each at its
        log offset (no transaction here: ``appended`` does not say whose batch it was)."""
        state = storage.GroupState()
        offset = 0
        for _, records in self.appended:
            for key, value in records:
                state.replay(key, value, -1, offset)
                offset += 1
        return state

    def end_txn(self, producer_id: int, commit: bool) -> None:
        """The transaction coordinator's marker of ``producer_id`` on this partition, committed."""
        self.core.apply_batch(storage.LogBatch([], producer_id, commit), self.now)
        self.log_end += 1

    def run(self, fx: Effects) -> Effects:
        self.events.extend(fx.events)
        for partition, records in fx.appends:
            self.appended.append((partition, records))
            self.apply(records, fx.producer[0] if fx.producer else -1)
        for waiter, response in fx.replies:
            assert waiter not in self.replies, f"{waiter} answered twice"
            self.replies[waiter] = response
        return fx

    def advance(self, ms: int) -> None:
        """Move the clock and tick, as the shell's timer task does, until nothing is due."""
        self.now += ms
        for _ in range(100):
            self.run(self.core.tick(self.now))
            deadline = self.core.next_deadline()
            if deadline is None or deadline > self.now:
                return
        raise AssertionError("deadlines keep firing at the same time")

    # ---- requests ------------------------------------------------------------------------

    def join(self, waiter: str, member_id: str = "", group: str = "g", instance_id: str | None = None,
             version: int = 5, protocols=PROTOCOLS, session_ms: int = 10000, rebalance_ms: int = 30000,
             protocol_type: str = "consumer", client_id: str = "client"):
        R = M.JoinGroupRequest
        req = R(group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms,
                member_id=member_id, group_instance_id=instance_id, protocol_type=protocol_type,
                protocols=[R.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols])
        self.run(self.core.join_group(req, version, client_id, "/127.0.0.1", waiter, self.now))
        return self.replies.get(waiter)

    def join_new(self, waiter: str, **kw):
        """JoinGroup v4+ twice: MEMBER_ID_REQUIRED, then with the id handed out."""
        first = self.join(waiter + "-id", **kw)
        assert first.error_code == 79, first
        return first.member_id, self.join(waiter, member_id=first.member_id, **kw)

    def sync(self, waiter: str, member_id: str, generation: int, assignments=None, group: str = "g",
             instance_id: str | None = None, version: int = 3):
        R = M.SyncGroupRequest
        req = R(group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance_id,
                assignments=[R.SyncGroupRequestAssignment(member_id=m, assignment=a)
                             for m, a in (assignments or {}).items()])
        self.run(self.core.sync_group(req, version, waiter, self.now))
        return self.replies.get(waiter)

    def heartbeat(self, member_id: str, generation: int, group: str = "g", instance_id: str | None = None):
        req = M.HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id,
                                 group_instance_id=instance_id)
        return self.core.heartbeat(req, 3, self.now)

    def leave(self, *members, group: str = "g"):
        code, errors, fx = self.core.leave_group(group, list(members), self.now)
        self.run(fx)
        return code, errors

    def commit(self, offsets, group: str = "g", generation: int = -1, member_id: str = "",
               instance_id: str | None = None, version: int = 8):
        rows = [(t, p, o, -1, "meta") for t, p, o in offsets]
        errors, fx = self.core.commit_offsets(group, generation, member_id, instance_id, rows, version,
                                              self.now)
        self.run(fx)
        return errors

    def txn_commit(self, offsets, producer_id: int = 1000, group: str = "g", generation: int = -1,
                   member_id: str = "", instance_id: str | None = None, version: int = 5):
        """TxnOffsetCommit of (topic, partition, offset)s by ``producer_id`` (epoch 0)."""
        rows = [(t, p, o, -1, "meta") for t, p, o in offsets]
        errors, fx = self.core.commit_transactional_offsets(group, producer_id, 0, generation, member_id,
                                                            instance_id, rows, version, self.now)
        self.run(fx)
        return errors

    def committed(self, group: str = "g") -> dict[tuple[str, int], int]:
        return {tp: om.offset for tp, om in self.core.offsets.get(group, {}).items()}

    def state(self, group: str = "g") -> str:
        return self.core.groups[group].state

    def stable_group(self, n: int, **kw) -> list[str]:
        """``n`` dynamic members joined and synced; their member ids (the leader first)."""
        ids = []
        for i in range(n):
            member_id, _ = self.join_new(f"setup-j{i}-{self.now}", **kw)
            ids.append(member_id)
        self.advance(self.core.config.initial_rebalance_delay_ms)  # the join phase completes
        generation = self.core.groups["g"].generation_id
        leader = self.core.groups["g"].leader_id
        for i, m in enumerate(ids):
            if m != leader:
                self.sync(f"setup-s{i}-{self.now}", m, generation)
        self.sync(f"setup-sl-{self.now}", leader, generation, {m: m.encode() for m in ids})
        assert self.state() == "Stable"
        return [leader] + [m for m in ids if m != leader]
