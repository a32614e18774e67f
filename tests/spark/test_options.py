"""Option parsing: Spark's Kafka names, clear messages for every mistake (no Spark needed)."""
from __future__ import annotations

import pytest

from spark.errors import StromSparkError
from spark.options import (
    DEFAULT_MAX_PARTITION_BYTES,
    EARLIEST,
    LATEST,
    LOG_END,
    READ_COMMITTED,
    OffsetSpec,
    parse_options,
)


def parse(**options):
    return parse_options({"path": "/data", **options})


def test_defaults():
    o = parse(subscribe="orders")
    assert o.paths == ("/data",)
    assert o.subscription.kind == "subscribe" and o.subscription.topics == ("orders",)
    assert o.starting_for_batch() == OffsetSpec(EARLIEST)
    assert o.ending_for_batch() == OffsetSpec(LATEST)
    assert o.starting_for_stream() == OffsetSpec(LATEST)
    assert (o.include_headers, o.isolation, o.fail_on_data_loss, o.push_filters, o.check_crcs) == (
        False, READ_COMMITTED, True, False, True)
    assert o.max_partition_bytes == DEFAULT_MAX_PARTITION_BYTES
    assert o.min_partitions is None and o.max_offsets_per_trigger is None


def test_names_are_case_insensitive_and_values_parsed():
    o = parse_options({
        "PATH": "/a, /b", "SubscribePattern": "ord.*", "STARTINGOFFSETS": '{"orders":{"0":5,"1":-2}}',
        "endingOffsets": '{"orders":{"0":9}}', "includeHeaders": "TRUE", "isolation": "LOG_END",
        "failOnDataLoss": "false", "minPartitions": "4", "maxPartitionBytes": "1000",
        "maxOffsetsPerTrigger": "25", "pushFilters": "true", "checkCrcs": "false",
    })
    assert o.paths == ("/a", "/b")
    assert o.subscription.pattern == "ord.*"
    assert o.starting_offsets == OffsetSpec(EARLIEST, {("orders", 0): 5, ("orders", 1): -2})
    assert o.ending_offsets == OffsetSpec(LATEST, {("orders", 0): 9})
    assert o.ending_offsets.for_partition(("orders", 1)) == LATEST
    assert (o.include_headers, o.isolation, o.fail_on_data_loss) == (True, LOG_END, False)
    assert (o.min_partitions, o.max_partition_bytes, o.max_offsets_per_trigger) == (4, 1000, 25)
    assert (o.push_filters, o.check_crcs) == (True, False)


def test_assign_and_timestamps():
    o = parse(assign='{"a":[0,2],"b":[1]}', startingTimestamp="1700000000000",
              startingOffsetsByTimestamp='{"a":{"2":1700000005000}}', endingTimestamp="1800000000000",
              startingOffsetsByTimestampStrategy="latest")
    assert o.subscription.assigned == (("a", 0), ("a", 2), ("b", 1))
    assert o.starting_timestamps.for_partition(("a", 0)) == 1700000000000
    assert o.starting_timestamps.for_partition(("a", 2)) == 1700000005000
    assert o.ending_timestamps.for_partition(("b", 1)) == 1800000000000
    assert o.timestamp_strategy == "latest"


@pytest.mark.parametrize("options,message", [
    ({}, "exactly one of the options assign, subscribe, subscribePattern"),
    ({"subscribe": "a", "assign": '{"a":[0]}'}, "(got assign, subscribe)"),
    ({"subscribe": " , "}, "subscribe: no topic"),
    ({"subscribePattern": "("}, "not a valid regular expression"),
    ({"assign": "[0]"}, 'assign: expected JSON like {"orders":[0,1]}'),
    ({"assign": '{"a":"0"}'}, "assign: topic 'a' needs a list of partition numbers"),
    ({"assign": "{}"}, "assign: no partition"),
    ({"subscribe": "a", "startingOffsets": "first"}, "startingOffsets: expected JSON like"),
    ({"subscribe": "a", "startingOffsets": '{"a":{"x":1}}'}, "expected a partition number"),
    ({"subscribe": "a", "startingOffsets": '{"a":{"0":-3}}'}, "is not an offset, -2 or -1"),
    ({"subscribe": "a", "startingTimestamp": "yesterday"}, "startingTimestamp: expected an integer"),
    ({"subscribe": "a", "isolation": "serializable"}, "isolation: expected one of read_committed"),
    ({"subscribe": "a", "includeHeaders": "yes"}, "includeHeaders: expected true or false"),
    ({"subscribe": "a", "minPartitions": "0"}, "minPartitions: expected a positive integer"),
    ({"subscribe": "a", "kafka.bootstrap.servers": "x:9092"}, "unknown option(s) kafka.bootstrap.servers"),
])
def test_mistakes_are_named(options, message):
    with pytest.raises(StromSparkError) as err:
        parse(**options)
    assert str(err.value).startswith("strom: ")
    assert message in str(err.value)


def test_paths_from_load_with_a_list():
    o = parse_options({"paths": '["/a", "/b"]', "path": "/a", "subscribe": "t"})
    assert o.paths == ("/a", "/b")
    with pytest.raises(StromSparkError, match="paths: expected a JSON list of paths"):
        parse_options({"paths": "/a", "subscribe": "t"})


def test_no_path():
    with pytest.raises(StromSparkError, match="no path"):
        parse_options({"subscribe": "a"})


def test_batch_and_stream_only_offsets():
    with pytest.raises(StromSparkError, match="latest .* is not allowed in a batch query"):
        parse(subscribe="a", startingOffsets="latest").starting_for_batch()
    with pytest.raises(StromSparkError, match="is not allowed in a batch query"):
        parse(subscribe="a", startingOffsets='{"a":{"0":-1}}').starting_for_batch()
    with pytest.raises(StromSparkError, match="earliest .* is not allowed in a batch query"):
        parse(subscribe="a", endingOffsets="earliest").ending_for_batch()
    with pytest.raises(StromSparkError, match="batch queries only"):
        parse(subscribe="a", endingOffsets="latest").starting_for_stream()
