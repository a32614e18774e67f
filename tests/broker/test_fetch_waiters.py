"""Long-poll fetches are woken by appends to their own partitions only (broker/fetch_waiters.py)."""
import asyncio

from broker.fetch_waiters import FetchWaiters


def run(coro):
    return asyncio.run(coro)


def test_an_append_wakes_the_fetches_waiting_on_that_partition_only():
    async def main():
        w = FetchWaiters()
        on_a = w.wait([("t", 0)])
        on_b = w.wait([("t", 1)])
        on_both = w.wait([("t", 0), ("t", 1)])
        w.notify(("t", 0))
        assert on_a.done() and on_both.done()
        assert not on_b.done()
        w.notify(("u", 0))  # nobody waits there
        assert not on_b.done()
    run(main())


def test_forgotten_waiters_leave_nothing_behind():
    async def main():
        w = FetchWaiters()
        keys = [("t", 0), ("t", 1)]
        fut = w.wait(keys)
        w.forget(keys, fut)
        assert len(w) == 0
        w.notify(("t", 0))
        assert not fut.done()
    run(main())


def test_a_metadata_change_wakes_every_waiting_fetch():
    async def main():
        w = FetchWaiters()
        futs = [w.wait([("t", i)]) for i in range(3)]
        w.notify_all()
        assert all(f.done() for f in futs)
        assert len(w) == 0
    run(main())


def test_a_fetch_whose_waiter_was_already_completed_is_not_completed_twice():
    async def main():
        w = FetchWaiters()
        fut = w.wait([("t", 0), ("t", 1)])
        w.notify(("t", 0))
        w.notify(("t", 1))  # the same future under the second key: no InvalidStateError
        assert fut.done()
    run(main())


def test_a_high_watermark_move_wakes_consumer_fetches_and_not_replica_fetches():
    async def main():
        w = FetchWaiters()
        consumer = w.wait([("t", 0)])
        replica = w.wait([("t", 0)], replica=True)
        w.notify(("t", 0), replicas=False)  # the high watermark moved
        assert consumer.done() and not replica.done()
        w.notify(("t", 0))  # records were appended
        assert replica.done()
        later = w.wait([("t", 0)], replica=True)
        w.notify_all()  # a metadata change
        assert later.done()
        w.forget([("t", 0)], later, replica=True)
        assert len(w) == 0
    run(main())
