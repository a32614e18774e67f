"""The records of __transaction_state, as Kafka writes and reads them (TransactionLog)."""
import pytest

from broker.transactions import storage
from broker.transactions.state import TransactionMetadata, TxnState


def meta(**kw):
    base = dict(transactional_id="t", producer_id=1000, previous_producer_id=999, next_producer_id=-1,
                producer_epoch=3, timeout_ms=60000, state=TxnState.ONGOING,
                partitions={("a", 0), ("a", 2), ("b", 1)}, start_ms=10, last_update_ms=20,
                client_transaction_version=2)
    base.update(kw)
    return TransactionMetadata(**base)


def test_key_is_the_coordinator_record_type_0_then_the_transactional_id():
    assert storage.key("t") == bytes.fromhex("0000" "0001" "74")
    assert storage.parse_key(storage.key("tx-1")) == "tx-1"


def test_value_v0_is_kafkas_non_flexible_layout():
    m = meta(partitions={("a", 0)}, start_ms=5, last_update_ms=6)
    v = storage.value(m, version=0)
    assert v == bytes.fromhex(
        "0000" "00000000000003e8" "0003" "0000ea60" "01"
        "00000001" "0001" "61" "00000001" "00000000"
        "0000000000000006" "0000000000000005")


def test_value_v1_round_trips_with_the_tagged_producer_ids_and_transaction_version():
    m = meta(next_producer_id=2000)
    v = storage.value(m)
    assert v[:2] == b"\x00\x01"
    back = storage.parse_value("t", v)
    assert (back.producer_id, back.previous_producer_id, back.next_producer_id, back.producer_epoch,
            back.state, back.partitions, back.client_transaction_version) == (
        1000, 999, 2000, 3, TxnState.ONGOING, {("a", 0), ("a", 2), ("b", 1)}, 2)
    assert back.last_producer_epoch == -1  # not stored: a loaded transaction has none


def test_an_empty_transaction_stores_null_partitions():
    m = meta(state=TxnState.EMPTY, partitions=set())
    v = storage.value(m, version=0)
    assert v[2 + 8 + 2 + 4 + 1:][:4] == b"\xff\xff\xff\xff"
    assert storage.parse_value("t", v).partitions == set()


def test_a_dead_transactional_id_is_a_tombstone_and_replay_forgets_it():
    records = [storage.record(meta()), storage.record(meta(transactional_id="u")),
               storage.record(meta(state=TxnState.DEAD, partitions=set()))]
    assert records[2][1] is None
    assert set(storage.replay(records)) == {"u"}


def test_replay_keeps_the_latest_record_of_each_id():
    records = [storage.record(meta()), storage.record(meta(state=TxnState.PREPARE_COMMIT, producer_epoch=4))]
    out = storage.replay(records)
    assert out["t"].state is TxnState.PREPARE_COMMIT and out["t"].producer_epoch == 4


def test_replay_skips_a_record_whose_key_version_it_does_not_know_as_kafkas_load_does():
    """Kafka's loadTransactionsForTxnTopicPartition ignores an UnknownKey ("a left over from an
    aborted upgrade") and loads the rest; a truncated key is still an error."""
    k, v = storage.record(meta())
    unknown = (b"\x00\x07" + bytes(k[2:]), v)
    assert set(storage.replay([unknown, storage.record(meta(transactional_id="u"))])) == {"u"}
    with pytest.raises(ValueError):
        storage.replay([(b"\x00", v)])


def test_partition_for_is_javas_hash_modulo_the_partition_count():
    # "" hashes to 0; Kafka puts a transactional id where it puts a group id of the same name
    from broker.groups.storage import partition_for as group_partition
    assert storage.partition_for("", 50) == 0
    for tid in ("a", "my-txn", "Ω-producer"):
        assert storage.partition_for(tid, 50) == group_partition(tid, 50)
