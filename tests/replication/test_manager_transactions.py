"""Transactions through the ReplicaManager and the Fetch and ListOffsets handlers: a
read_committed Fetch stops at the last stable offset and names the aborted transactions of what
it returns; every Fetch answers the last stable offset; ListOffsets read_committed answers it for
LATEST; markers a coordinator writes are fenced as Kafka fences them; DescribeProducers' view
carries the open transaction's first offset."""
from __future__ import annotations

import asyncio

from engine.control import CONTROL_ABORT, CONTROL_COMMIT, build_end_txn_marker_batch
from engine.log import ORIGIN_COORDINATOR
from ext.batch import build_batch
from protocol import messages as M
from protocol.errors import Error
from tests.broker.replica_nodes import BASE_TS, TOPIC, Cluster, Node


def run(coro):
    return asyncio.run(coro)


def single(tmp_path) -> Node:
    cluster = Cluster(brokers=(1,))
    cluster.create_topic(replicas=(1,))
    return Node(tmp_path, 1, cluster)


def txn_data(n: int, pid: int, seq: int, epoch: int = 0) -> bytearray:
    records = [(b"k", b"v%d" % i, [], BASE_TS + i) for i in range(n)]
    return bytearray(build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                 is_transactional=True))


def end_txn(node: Node, pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0):
    batch = bytearray(build_end_txn_marker_batch(CONTROL_COMMIT if commit else CONTROL_ABORT, pid, epoch,
                                                 coordinator_epoch, BASE_TS))
    return node.replicas.append_local(TOPIC, 0, batch, acks=1, origin=ORIGIN_COORDINATOR)


def history(node: Node) -> None:
    """0-2 producer 1, aborted at 6; 3-5 producer 2, committed at 7; 8-9 producer 3, open."""
    for pid in (1, 2):
        assert node.replicas.append_local(TOPIC, 0, txn_data(3, pid, 0), acks=1).error == Error.NONE
    assert end_txn(node, 1, commit=False).error == Error.NONE
    assert end_txn(node, 2, commit=True).error == Error.NONE
    assert node.replicas.append_local(TOPIC, 0, txn_data(2, 3, 0), acks=1).error == Error.NONE


async def fetch(node: Node, offset: int, isolation_level: int):
    request = node.fetch_request(offset)
    request.isolation_level = isolation_level
    response = await node.call(1, 16, request)
    return response.responses[0].partitions[0]


def test_a_read_committed_fetch_stops_at_the_lso_and_returns_the_aborted_transactions(tmp_path):
    async def main():
        node = single(tmp_path)
        history(node)
        assert node.log().high_watermark == 10
        pd = await fetch(node, 0, isolation_level=1)
        assert (pd.high_watermark, pd.last_stable_offset) == (10, 8)
        assert [(t.producer_id, t.first_offset) for t in pd.aborted_transactions] == [(1, 0)]
        assert pd.records.size < node.log().segments[0].size, "the open transaction is not sent"
        pd = await fetch(node, 0, isolation_level=0)
        assert (pd.high_watermark, pd.last_stable_offset) == (10, 8), "the LSO, not the HW, as Kafka"
        assert pd.aborted_transactions is None
    run(main())


def test_a_read_committed_fetch_lists_the_aborted_transactions_by_first_offset(tmp_path):
    """The .txnindex holds aborted transactions in abort order, and Kafka answers them in that
    order, which the Java client and librdkafka sort. kafkajs does not: it walks the list as a
    queue by first offset, so a transaction aborted after one that began later (producer 1
    below) would be missed and its records shown read_committed. The list is answered in
    first-offset order, which every client reads alike."""
    async def main():
        node = single(tmp_path)
        assert node.replicas.append_local(TOPIC, 0, txn_data(2, 1, 0), acks=1).error == Error.NONE  # 0-1
        assert node.replicas.append_local(TOPIC, 0, txn_data(2, 2, 0), acks=1).error == Error.NONE  # 2-3
        assert end_txn(node, 2, commit=False).error == Error.NONE  # 4
        assert end_txn(node, 1, commit=False).error == Error.NONE  # 5
        assert [(t.producer_id, t.first_offset) for t in node.log().collect_aborted(0, 6)] == [(2, 2), (1, 0)]
        pd = await fetch(node, 0, isolation_level=1)
        assert pd.last_stable_offset == 6
        assert [(t.producer_id, t.first_offset) for t in pd.aborted_transactions] == [(1, 0), (2, 2)]
    run(main())


def test_list_offsets_read_committed_answers_the_lso_for_latest(tmp_path):
    async def main():
        node = single(tmp_path)
        history(node)
        R = M.ListOffsetsRequest
        answers = {}
        for level in (0, 1):
            request = R(replica_id=-1, isolation_level=level, topics=[R.ListOffsetsTopic(
                name=TOPIC, partitions=[R.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
            answers[level] = (await node.call(2, 7, request)).topics[0].partitions[0].offset
        assert answers == {0: 10, 1: 8}
    run(main())


def test_a_marker_from_an_older_coordinator_epoch_answers_transaction_coordinator_fenced(tmp_path):
    node = single(tmp_path)
    node.replicas.append_local(TOPIC, 0, txn_data(1, 5, 0), acks=1)
    assert end_txn(node, 5, commit=True, coordinator_epoch=3).error == Error.NONE
    node.replicas.append_local(TOPIC, 0, txn_data(1, 5, 1), acks=1)
    assert end_txn(node, 5, commit=True, coordinator_epoch=2).error == Error.TRANSACTION_COORDINATOR_FENCED
    node.replicas.append_local(TOPIC, 0, txn_data(1, 9, 0, epoch=4), acks=1)
    assert end_txn(node, 9, commit=True, epoch=3).error == Error.INVALID_PRODUCER_EPOCH


def test_a_plain_write_of_a_producer_in_a_transaction_answers_invalid_txn_state(tmp_path):
    node = single(tmp_path)
    node.replicas.append_local(TOPIC, 0, txn_data(1, 5, 0), acks=1)
    plain = bytearray(build_batch([(b"k", b"v", [], BASE_TS)], producer_id=5, producer_epoch=0,
                                  base_sequence=1))
    assert node.replicas.append_local(TOPIC, 0, plain, acks=1).error == Error.INVALID_TXN_STATE


def test_active_producers_show_the_current_transaction_start_offset(tmp_path):
    node = single(tmp_path)
    history(node)
    error, views = node.replicas.active_producers(TOPIC, 0)
    assert error == Error.NONE
    assert {v.producer_id: v.current_txn_start_offset for v in views} == {1: -1, 2: -1, 3: 8}


def test_a_read_committed_long_poll_parked_at_the_lso_wakes_when_the_marker_moves_it(tmp_path):
    async def main():
        node = single(tmp_path)
        node.replicas.append_local(TOPIC, 0, txn_data(3, 4, 0), acks=1)
        request = node.fetch_request(0, max_wait_ms=30000, min_bytes=1)
        request.isolation_level = 1
        parked = asyncio.ensure_future(node.call(1, 16, request))
        await asyncio.sleep(0.05)
        assert not parked.done(), "nothing is stable below the open transaction"
        assert end_txn(node, 4, commit=True).error == Error.NONE
        pd = (await asyncio.wait_for(parked, 10)).responses[0].partitions[0]
        assert pd.last_stable_offset == 4 and pd.records.size > 0
    run(main())
