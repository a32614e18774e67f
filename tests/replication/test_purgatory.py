"""The acks=all purgatory (replication/purgatory.py): threshold waiters keyed by offset."""
import asyncio

from replication import errors
from replication.purgatory import AcksPurgatory, Deadlines

TP = ("t", 0)


def run(coro):
    return asyncio.run(coro)


def ok(required: int) -> int:
    return errors.NONE


def test_a_high_watermark_answers_exactly_the_waiters_at_or_below_it_in_offset_order():
    async def main():
        p = AcksPurgatory()
        order = []
        futs = {offset: p.watch(TP, offset) for offset in (30, 10, 20)}
        for offset, fut in futs.items():
            fut.add_done_callback(lambda _, o=offset: order.append(o))
        assert p.complete_up_to(TP, 20, ok) == 2
        await asyncio.sleep(0)
        assert order == [10, 20]
        assert not futs[30].done() and p.waiting(TP) == [30]
    run(main())


def test_each_waiter_gets_the_verdict_for_its_own_offset():
    async def main():
        p = AcksPurgatory()
        low, high = p.watch(TP, 5), p.watch(TP, 9)
        weakened = errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        p.complete_up_to(TP, 9, lambda required: weakened if required > 5 else errors.NONE)
        assert (low.result(), high.result()) == (errors.NONE, errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    run(main())


def test_waiters_of_other_partitions_are_not_answered():
    async def main():
        p = AcksPurgatory()
        other = p.watch(("t", 1), 1)
        p.complete_up_to(TP, 100, ok)
        assert not other.done()
    run(main())


def test_lost_leadership_answers_every_waiter_of_the_partition():
    async def main():
        p = AcksPurgatory()
        futs = [p.watch(TP, o) for o in (1, 2, 3)]
        assert p.fail_partition(TP, errors.NOT_LEADER_OR_FOLLOWER) == 3
        assert [f.result() for f in futs] == [errors.NOT_LEADER_OR_FOLLOWER] * 3
        assert len(p) == 0
    run(main())


def test_a_forgotten_waiter_is_never_answered_and_leaves_nothing_behind():
    async def main():
        p = AcksPurgatory()
        gone, kept = p.watch(TP, 5), p.watch(TP, 6)
        p.forget(TP, gone)
        assert gone.cancelled()
        assert p.complete_up_to(TP, 10, ok) == 1 and kept.result() == errors.NONE
        for _ in range(10):
            p.forget(TP, p.watch(TP, 50))
        assert p.waiting(TP) == [] and len(p) == 0
        assert p._waiting == {}, "forgotten waiters are swept"
    run(main())


def test_waiters_for_the_same_offset_are_answered_in_arrival_order():
    async def main():
        p = AcksPurgatory()
        order = []
        for name in "abc":
            p.watch(TP, 7).add_done_callback(lambda _, n=name: order.append(n))
        p.complete_up_to(TP, 7, ok)
        await asyncio.sleep(0)
        assert order == ["a", "b", "c"]
    run(main())


class Wait:
    def __init__(self, name, log):
        self.name, self.log, self.finished = name, log, False

    def expire(self):
        self.finished = True
        self.log.append(self.name)


def loop_timers() -> int:
    return sum(1 for handle in asyncio.get_running_loop()._scheduled if not handle.cancelled())


def test_deadlines_expire_in_deadline_order_on_one_loop_timer_and_skip_finished_waits():
    async def main():
        d, log = Deadlines(), []
        before = loop_timers()
        waits = {name: Wait(name, log) for name in "abcd"}
        d.add(0.06, waits["a"])
        d.add(0.02, waits["b"])  # earlier than the armed timer: re-armed for it
        d.add(0.04, waits["c"])
        d.add(0.03, waits["d"])
        assert loop_timers() == before + 1 and len(d) == 4
        waits["d"].finished = True  # answered before its deadline
        d.finished()
        assert len(d) == 3
        await asyncio.sleep(0.1)
        assert log == ["b", "c", "a"] and len(d) == 0 and loop_timers() == before
    run(main())


def test_deadlines_sweep_answered_waits_once_they_are_most_of_the_heap():
    async def main():
        d, log = Deadlines(), []
        waits = [Wait(i, log) for i in range(200)]
        for w in waits:
            d.add(30, w)
        for w in waits[:150]:
            w.finished = True
            d.finished()
        assert len(d) == 50 and len(d._heap) <= 101  # swept past half, not 200 kept
        d.add(0.01, Wait("soon", log))  # earlier than every deadline left: the timer moves to it
        await asyncio.sleep(0.05)
        assert log == ["soon"] and len(d) == 50
    run(main())
