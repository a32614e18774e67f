"""The transaction APIs authorized as Kafka's KafkaApis authorizes them
(broker/handlers/transactions.py with the broker's real BrokerAuthorizer over the ACLs each test
gives it): WRITE on the transactional id to add partitions or offsets and to end it, WRITE on
each topic added, READ on the group whose offsets join it, CLUSTER_ACTION for what brokers send
each other, DESCRIBE to see a transaction."""
from __future__ import annotations

import pytest

from broker.authorizer import BrokerAuthorizer
from broker.transactions.runtime import TOPIC as STATE_TOPIC
from engine.log import Log
from metadata.security import (
    CLUSTER,
    CLUSTER_ACTION,
    CLUSTER_NAME,
    DESCRIBE,
    GROUP,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
    AclEntry,
)
from protocol import messages as M
from protocol.context import KafkaPrincipal, RequestContext, Session
from protocol.errors import Error
from protocol.headers import RequestHeader
from tests.broker.test_handlers_transactions import R, errors_of, serve
from tests.security.acls import acl

ALICE = Session("PLAINTEXT", client_address="127.0.0.1", principal=KafkaPrincipal("User", "alice"))
BOB = Session("PLAINTEXT", client_address="127.0.0.1", principal=KafkaPrincipal("User", "bob"))
BROKER = Session("PLAINTEXT", client_address="127.0.0.1", principal=KafkaPrincipal("User", "broker"))


def authorizer(*acls: AclEntry) -> BrokerAuthorizer:
    held = {a.id: a for a in acls}
    return BrokerAuthorizer(lambda: held)


def as_(session: Session, api_key: int, version: int) -> RequestContext:
    return RequestContext(RequestHeader(api_key, version, 1, "test", 2), session)


def _add(pid: int, epoch: int, *topics: tuple[str, list[int]]):
    return R(v3_and_below_transactional_id="t", v3_and_below_producer_id=pid,
             v3_and_below_producer_epoch=epoch,
             v3_and_below_topics=[R.AddPartitionsToTxnTopic(name=n, partitions=ps) for n, ps in topics])


@pytest.fixture
def log(tmp_path):
    log = Log(str(tmp_path / f"{STATE_TOPIC}-0"))
    yield log
    log.close()


def test_add_partitions_to_txn_without_write_on_the_transactional_id_fails_every_partition(log):
    async def scenario(apis, pid, epoch):
        response = await apis[24](as_(ALICE, 24, 3), _add(pid, epoch, ("a", [0, 1])))
        assert errors_of(response.results_by_topic_v3_and_below) == dict.fromkeys(
            [("a", 0), ("a", 1)], Error.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    serve(log, scenario, authorizer=authorizer(acl(TOPIC, "a", WRITE), acl(TRANSACTIONAL_ID, "t", DESCRIBE)))


def test_add_partitions_to_txn_without_write_on_a_topic_refuses_it_and_attempts_no_other(log):
    async def scenario(apis, pid, epoch):
        # an internal topic is refused whatever the ACLs, before the image is asked
        response = await apis[24](as_(ALICE, 24, 3), _add(pid, epoch, ("a", [0]), ("b", [0]),
                                                          ("__consumer_offsets", [0]), ("nope", [0])))
        assert errors_of(response.results_by_topic_v3_and_below) == {
            ("a", 0): Error.OPERATION_NOT_ATTEMPTED, ("b", 0): Error.TOPIC_AUTHORIZATION_FAILED,
            ("__consumer_offsets", 0): Error.TOPIC_AUTHORIZATION_FAILED,
            ("nope", 0): Error.UNKNOWN_TOPIC_OR_PARTITION}
        response = await apis[24](as_(ALICE, 24, 3), _add(pid, epoch, ("a", [0])))
        assert errors_of(response.results_by_topic_v3_and_below) == {("a", 0): Error.NONE}
    serve(log, scenario, authorizer=authorizer(
        acl(TRANSACTIONAL_ID, "t", WRITE), acl(TOPIC, "a", WRITE), acl(TOPIC, "nope", WRITE),
        acl(TOPIC, "__consumer_offsets", WRITE)))


def test_a_brokers_add_partitions_to_txn_needs_cluster_action_on_the_cluster(log):
    async def scenario(apis, pid, epoch):
        verify = R(transactions=[R.AddPartitionsToTxnTransaction(
            transactional_id="t", producer_id=pid, producer_epoch=epoch, verify_only=True,
            topics=[R.AddPartitionsToTxnTopic(name="a", partitions=[0])])])
        refused = await apis[24](as_(ALICE, 24, 4), verify)
        assert refused.error_code == Error.CLUSTER_AUTHORIZATION_FAILED
        assert refused.results_by_transaction == []
        answered = await apis[24](as_(BROKER, 24, 4), verify)
        assert answered.error_code == Error.NONE
        assert errors_of(answered.results_by_transaction[0].topic_results) == \
            {("a", 0): Error.TRANSACTION_ABORTABLE}
    serve(log, scenario, authorizer=authorizer(
        acl(CLUSTER, CLUSTER_NAME, CLUSTER_ACTION, principal="User:broker"),
        acl(TRANSACTIONAL_ID, "t", WRITE)))


def test_add_offsets_to_txn_needs_write_on_the_transactional_id_and_read_on_the_group(log):
    async def scenario(apis, pid, epoch):
        def offsets(tid, group):
            return M.AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                            group_id=group)
        assert (await apis[25](as_(ALICE, 25, 3), offsets("other", "g"))).error_code == \
            Error.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert (await apis[25](as_(ALICE, 25, 3), offsets("t", "h"))).error_code == \
            Error.GROUP_AUTHORIZATION_FAILED
        assert (await apis[25](as_(ALICE, 25, 3), offsets("t", "g"))).error_code == Error.NONE
    serve(log, scenario, authorizer=authorizer(acl(TRANSACTIONAL_ID, "t", WRITE), acl(GROUP, "g", READ)))


def test_end_txn_without_write_on_the_transactional_id_answers_transactional_id_authorization_failed(log):
    async def scenario(apis, pid, epoch):
        end = M.EndTxnRequest(transactional_id="t", producer_id=pid, producer_epoch=epoch, committed=True)
        response = await apis[26](as_(ALICE, 26, 3), end)
        assert response.error_code == Error.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert response.producer_id == -1
    serve(log, scenario, authorizer=authorizer(acl(TRANSACTIONAL_ID, "t", DESCRIBE)))


def test_write_txn_markers_without_cluster_action_fails_every_partition(log):
    async def scenario(apis, pid, epoch):
        W = M.WriteTxnMarkersRequest
        request = W(markers=[W.WritableTxnMarker(
            producer_id=pid, producer_epoch=epoch, transaction_result=True, coordinator_epoch=0,
            topics=[W.WritableTxnMarker.WritableTxnMarkerTopic(name="a", partition_indexes=[0, 1])])])
        (marker,) = (await apis[27](as_(ALICE, 27, 1), request)).markers
        assert [(t.name, p.partition_index, p.error_code) for t in marker.topics for p in t.partitions] == [
            ("a", 0, Error.CLUSTER_AUTHORIZATION_FAILED), ("a", 1, Error.CLUSTER_AUTHORIZATION_FAILED)]
    serve(log, scenario, authorizer=authorizer(acl(TOPIC, "a", WRITE), acl(CLUSTER, CLUSTER_NAME, DESCRIBE)))


def test_describe_and_list_transactions_show_only_what_the_principal_may_describe(log):
    async def scenario(apis, pid, epoch):
        admin_add = await apis[24](as_(BROKER, 24, 3), _add(pid, epoch, ("a", [0])))
        assert errors_of(admin_add.results_by_topic_v3_and_below) == {("a", 0): Error.NONE}
        request = M.DescribeTransactionsRequest(transactional_ids=["t", "other"])
        described, refused = (await apis[65](as_(ALICE, 65, 0), request)).transaction_states
        # alice may describe t but not topic a: the partition is left out
        assert (described.error_code, described.transaction_state, described.topics) == \
            (Error.NONE, "Ongoing", [])
        assert (refused.transactional_id, refused.error_code) == \
            ("other", Error.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        (described, _) = (await apis[65](as_(BROKER, 65, 0), request)).transaction_states
        assert [(t.topic, t.partitions) for t in described.topics] == [("a", [0])]
        listing = M.ListTransactionsRequest(state_filters=[], producer_id_filters=[], duration_filter=-1)
        assert [s.transactional_id for s in (await apis[66](as_(ALICE, 66, 1), listing)).transaction_states] \
            == ["t"]
        assert (await apis[66](as_(BOB, 66, 1), listing)).transaction_states == []
    serve(log, scenario, authorizer=authorizer(
        acl(TRANSACTIONAL_ID, "t", DESCRIBE), acl(TRANSACTIONAL_ID, "t", WRITE, principal="User:broker"),
        acl(TOPIC, "a", WRITE, principal="User:broker")))
