"""Mistakes and damage seen through Spark: the Python error Spark wraps carries a
``strom:`` line that says what is wrong and where."""
from __future__ import annotations

import os

import pytest

from tests.spark.conftest import read, varied_records


def strom_line(err: Exception) -> str:
    """The line of Spark's message that came from us."""
    lines = [line for line in str(err).splitlines() if "strom: " in line]
    assert lines, str(err)
    return lines[0][lines[0].index("strom: "):]


@pytest.fixture
def orders(broker):
    broker.create("orders", 2, segment_bytes=1000)
    for i in range(10):
        broker.append("orders", i % 2, varied_records(5, tag=f"o{i}"), compression=i % 5)
    broker.commit()
    return broker


def test_mistakes_fail_at_load(spark, orders, tmp_path):
    cases = [
        ({"path": str(tmp_path / "nowhere"), "subscribe": "orders"},
         f"strom: path {tmp_path / 'nowhere'} does not exist"),
        ({"path": orders.log_dir, "subscribe": "orders,shipments"},
         f"strom: topic 'shipments' does not exist under {orders.log_dir} (topics there: orders)"),
        ({"path": orders.log_dir, "assign": {"orders": [2]}},
         "strom: assign: partition orders-2 does not exist"),
        ({"path": orders.log_dir},
         "strom: give exactly one of the options assign, subscribe, subscribePattern"),
        ({"path": orders.log_dir, "subscribe": "orders", "startingOffsets": "{oops"},
         "strom: startingOffsets: expected JSON like"),
    ]
    for options, message in cases:
        path = options.pop("path")
        with pytest.raises(Exception) as err:
            read(spark, path, **options)
        assert strom_line(err.value).startswith(message), str(err.value)


def test_batch_only_offsets_and_schemas(spark, orders):
    with pytest.raises(Exception) as err:
        read(spark, orders.log_dir, subscribe="orders", startingOffsets="latest").count()
    assert "latest (or -1) is not allowed in a batch query" in strom_line(err.value)
    with pytest.raises(Exception) as err:
        spark.read.format("strom").schema("value binary").option("path", orders.log_dir) \
            .option("subscribe", "orders").load().count()
    assert "a user-specified schema is not supported" in strom_line(err.value)


def test_a_corrupt_segment_names_the_file_and_position(spark, orders):
    path = os.path.join(orders.log_dir, "orders-1", "00000000000000000000.log")
    with open(path, "r+b") as f:
        f.seek(200)
        f.write(b"\xde\xad\xbe\xef")
    df = read(spark, orders.log_dir, subscribe="orders")
    with pytest.raises(Exception) as err:
        df.collect()
    line = strom_line(err.value)
    assert line.startswith(f"strom: corrupt segment {path}: batch at "), line
    assert "reading orders-1 offsets [0, 25)" in line
    assert read(spark, orders.log_dir, assign={"orders": [0]}).count() == 25


def test_a_missing_path_in_a_stream(spark, tmp_path):
    with pytest.raises(Exception) as err:
        spark.readStream.format("strom").option("path", str(tmp_path / "gone")) \
            .option("subscribe", "t").load()
    assert strom_line(err.value) == f"strom: path {tmp_path / 'gone'} does not exist"
