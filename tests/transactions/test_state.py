"""Kafka's transaction states and their legal transitions (TransactionState, TransactionMetadata)."""
import itertools

import pytest

from broker.transactions.state import (
    IllegalTransition,
    TransactionMetadata,
    TxnState,
)

S = TxnState
# Kafka 4.x's TransactionState.validPreviousStates, written out independently of the code
KAFKA_LEGAL = {
    (S.EMPTY, S.EMPTY), (S.COMPLETE_COMMIT, S.EMPTY), (S.COMPLETE_ABORT, S.EMPTY),
    (S.ONGOING, S.ONGOING), (S.EMPTY, S.ONGOING), (S.COMPLETE_COMMIT, S.ONGOING),
    (S.COMPLETE_ABORT, S.ONGOING),
    (S.ONGOING, S.PREPARE_COMMIT),
    (S.ONGOING, S.PREPARE_ABORT), (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT), (S.EMPTY, S.PREPARE_ABORT),
    (S.COMPLETE_COMMIT, S.PREPARE_ABORT), (S.COMPLETE_ABORT, S.PREPARE_ABORT),
    (S.PREPARE_COMMIT, S.COMPLETE_COMMIT),
    (S.PREPARE_ABORT, S.COMPLETE_ABORT),
    (S.EMPTY, S.DEAD), (S.COMPLETE_COMMIT, S.DEAD), (S.COMPLETE_ABORT, S.DEAD),
    (S.ONGOING, S.PREPARE_EPOCH_FENCE),
}


def meta(state, **kw):
    return TransactionMetadata("t", 7, producer_epoch=1, state=state, **kw)


@pytest.mark.parametrize("src,dst", list(itertools.product(S, S)),
                         ids=[f"{a.kafka_name}-{b.kafka_name}" for a, b in itertools.product(S, S)])
def test_a_transition_is_legal_exactly_when_kafkas_state_table_allows_it(src, dst):
    m = meta(src)
    target = m.copy()
    target.state = dst
    if (src, dst) in KAFKA_LEGAL:
        assert m._prepare(target) is target
        assert m.pending is dst
        m.complete_transition(target)
        assert m.state is dst and m.pending is None
    else:
        with pytest.raises(IllegalTransition):
            m._prepare(target)
        assert m.pending is None and m.state is src


def test_state_ids_and_names_are_kafkas():
    assert [(s.value, s.kafka_name) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"), (4, "CompleteCommit"),
        (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
    assert {s for s in S if s.expiration_allowed} == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}


def test_no_transition_is_prepared_while_another_is_pending():
    m = meta(S.ONGOING)
    m.prepare_abort_or_commit(S.PREPARE_COMMIT, 2, -1, 5, False)
    with pytest.raises(IllegalTransition):
        m.prepare_fence_producer_epoch()


def test_complete_transition_refuses_a_target_that_is_not_the_pending_one():
    m = meta(S.ONGOING)
    m.prepare_abort_or_commit(S.PREPARE_COMMIT, 2, -1, 5, False)
    other = m.copy()
    other.state = S.PREPARE_ABORT
    with pytest.raises(IllegalTransition):
        m.complete_transition(other)


def test_tv2_end_bumps_the_epoch_and_remembers_the_last_one():
    m = meta(S.ONGOING, partitions={("a", 0)})
    t = m.prepare_abort_or_commit(S.PREPARE_COMMIT, 2, -1, 5, False)
    assert (t.producer_epoch, t.last_producer_epoch) == (2, 1)
    m2 = meta(S.ONGOING)
    t2 = m2.prepare_abort_or_commit(S.PREPARE_COMMIT, 0, -1, 5, False)
    assert t2.producer_epoch == 1


def test_complete_moves_to_the_next_producer_id_when_the_epoch_overflowed():
    m = meta(S.PREPARE_COMMIT, next_producer_id=99, client_transaction_version=2)
    t = m.prepare_complete(9)
    assert (t.state, t.producer_id, t.producer_epoch, t.next_producer_id) == (S.COMPLETE_COMMIT, 99, 0, -1)


def test_a_failed_fence_is_not_bumped_again():
    m = meta(S.ONGOING)
    m.has_failed_epoch_fence = True
    assert m.prepare_fence_producer_epoch().producer_epoch == 1
