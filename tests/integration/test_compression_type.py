"""compression.type on a real node: a topic created with compression.type=zstd stores what
confluent-kafka produced uncompressed as zstd batches, and a consumer reads the same records
back; KIP-390's compression levels set, described and validated through librdkafka's admin
client. The segment file is read with struct (batchLength at byte 8, attributes at byte 21,
codec in bits 0-2), not with Strom's code.
"""
import glob
import os
import struct
import uuid

import pytest

from .clients import confluent
from .cluster import StromNode

pytestmark = [
    pytest.mark.skipif(not confluent.AVAILABLE, reason="confluent-kafka is not installed"),
    pytest.mark.timeout(120),
]

NONE, LZ4, ZSTD = 0, 3, 4
FIRST_SEGMENT = "00000000000000000000.log"


def segment_codecs(path: str) -> list[int]:
    """The codec of each record batch in a segment file."""
    with open(path, "rb") as f:
        data = f.read()
    codecs, pos = [], 0
    while pos + 23 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        (attributes,) = struct.unpack_from(">h", data, pos + 21)
        codecs.append(attributes & 7)
        pos += 12 + length
    assert pos == len(data), "the segment ends inside a batch"
    return codecs


def test_a_topic_with_compression_type_zstd_stores_uncompressed_produce_as_zstd(shared_node):
    bootstrap, topic = shared_node.bootstrap, f"zstd-{uuid.uuid4().hex[:12]}"
    confluent.create_topic(bootstrap, topic, partitions=1, config={"compression.type": "zstd"})
    sent = [(f"key-{i % 5}".encode(), f"value-{i:04d}-".encode() + b"payload " * 30,
             [("n", str(i).encode())]) for i in range(200)]
    confluent.produce(bootstrap, topic, sent, acks="all", compression="none")
    records = confluent.consume_assign(bootstrap, topic, [0], len(sent), timeout=30)
    assert [(r.key, r.value, r.headers) for r in records] == sent
    assert [r.offset for r in records] == list(range(len(sent)))
    codecs = segment_codecs(os.path.join(shared_node.log_dir, f"{topic}-0", "00000000000000000000.log"))
    assert codecs and all(codec == ZSTD for codec in codecs), codecs


def test_compression_levels_are_set_described_and_validated_through_a_kafka_admin_client(shared_node):
    """KIP-390's topic configs over the wire: librdkafka creates a topic with one, sees it
    described (the others at Kafka's defaults), and an out-of-range level is INVALID_CONFIG
    naming it; the rewritten batches read back as sent."""
    bootstrap, topic = shared_node.bootstrap, f"zstd19-{uuid.uuid4().hex[:12]}"
    confluent.create_topic(bootstrap, topic, partitions=1,
                           config={"compression.type": "zstd", "compression.zstd.level": 19})
    configs = confluent.describe_topic_config(bootstrap, topic)
    assert (configs["compression.zstd.level"], configs["compression.gzip.level"],
            configs["compression.lz4.level"]) == ("19", "-1", "9")
    with pytest.raises(confluent.KafkaException) as err:
        confluent.alter_topic_config(bootstrap, topic, {"compression.zstd.level": 23})
    assert err.value.args[0].name() == "INVALID_CONFIG"
    assert "compression.zstd.level" in err.value.args[0].str()
    sent = [(None, b"level %d " % i * 20, []) for i in range(50)]
    confluent.produce(bootstrap, topic, sent, acks="all", compression="gzip")
    assert [r.value for r in confluent.consume_assign(bootstrap, topic, [0], len(sent), timeout=30)] == [
        v for _, v, _ in sent]
    path = os.path.join(shared_node.log_dir, f"{topic}-0", FIRST_SEGMENT)
    assert set(segment_codecs(path)) == {ZSTD}


def test_a_broker_compression_type_applies_to_topics_but_not_to_the_offsets_topic(tmp_path):
    """compression.type set on the broker is every topic's default, but Kafka creates
    __consumer_offsets with compression.type=producer: the coordinator's batches are stored as
    it writes them (uncompressed), not recompressed."""
    node = StromNode(str(tmp_path), extra={"compression.type": "lz4"})
    try:
        node.start()
        bootstrap, topic = node.bootstrap, f"lz4-{uuid.uuid4().hex[:12]}"
        confluent.create_topic(bootstrap, topic, partitions=1)
        confluent.produce(bootstrap, topic, [(None, b"v" * 100, [])] * 10, acks="all")
        assert len(confluent.consume_group(bootstrap, topic, f"g-{topic}", 10)) == 10  # commits
        configs = confluent.describe_topic_config(bootstrap, "__consumer_offsets")
        assert (configs["compression.type"], configs["cleanup.policy"]) == ("producer", "compact")
        assert set(segment_codecs(os.path.join(node.log_dir, f"{topic}-0", FIRST_SEGMENT))) == {LZ4}
        offsets = [os.path.join(d, FIRST_SEGMENT)
                   for d in glob.glob(os.path.join(node.log_dir, "__consumer_offsets-*"))]
        codecs = {c for path in offsets if os.path.getsize(path) for c in segment_codecs(path)}
        assert codecs == {NONE}, codecs
    finally:
        node.close()
