"""strom top's model from canned answers: the quorum's replicas and their lag behind the high
watermark, each broker's state, partitions led and rates (from /metrics counters, or from the log
end offsets without metrics), under-replicated and offline partitions, consumer group lag; and
both renderers' sections."""
from __future__ import annotations

from protocol import messages as M
from protocol.errors import Error
from strom import cluster_status as status
from strom import top

R = M.DescribeQuorumResponse


def quorum_answer(hw=120, error=Error.NONE):
    return R(error_code=Error.NONE, topics=[R.TopicData(topic_name="__cluster_metadata", partitions=[
        R.PartitionData(partition_index=0, error_code=error, leader_id=2, leader_epoch=7, high_watermark=hw,
                        current_voters=[R.ReplicaState(replica_id=i, log_end_offset=o)
                                        for i, o in ((3, 115), (1, 120), (2, 121))],
                        observers=[R.ReplicaState(replica_id=4, log_end_offset=100)])])])


def view():
    P = status.PartitionInfo
    return status.BrokerAnswer(frozenset({4, 5}), frozenset({6}), (
        P("orders", 0, 4, 1, (4, 5, 6), (4, 5)),
        P("orders", 1, 5, 1, (5, 6, 4), (5, 6, 4)),
        P("orders", 2, -1, 2, (6,), (6,), (6,), Error.LEADER_NOT_AVAILABLE),
    ))


def test_the_quorum_gives_each_replicas_lag_behind_the_high_watermark():
    q = top.parse_quorum(quorum_answer())
    assert (q.leader_id, q.epoch, q.high_watermark) == (2, 7, 120)
    voters = [(r.replica_id, r.log_end_offset, r.lag) for r in q.voters]
    assert voters == [(1, 120, 0), (2, 121, 0), (3, 115, 5)]
    assert [(r.replica_id, r.lag) for r in q.observers] == [(4, 20)]


def test_a_follower_controllers_answer_is_no_quorum_view():
    try:
        top.parse_quorum(quorum_answer(error=Error.NOT_LEADER_OR_FOLLOWER))
    except status.ProbeFailed:
        return
    raise AssertionError("a NOT_LEADER_OR_FOLLOWER answer was taken as the leader's")


def test_broker_rates_come_from_the_metrics_counters_between_refreshes():
    log_end = {("orders", 0): 10, ("orders", 1): 20}
    before = {4: (1000, 50), 5: (0, 0)}
    first, sample = top.build_snapshot(None, view(), [], log_end, {}, before, None, 100.0)
    assert [b.rate_in for b in first.brokers] == [None, None, None]
    after = {4: (3000, 450), 5: (500, 0)}
    second, _ = top.build_snapshot(None, view(), [], log_end, {}, after, sample, 102.0)
    rows = {b.node_id: b for b in second.brokers}
    assert (rows[4].state, rows[4].leader_of) == ("unfenced", 1)
    assert (rows[4].rate_in, rows[4].rate_out) == (1000.0, 200.0)
    assert (rows[5].rate_in, rows[5].rate_out) == (250.0, 0.0)
    assert (rows[6].state, rows[6].leader_of, rows[6].rate_in) == ("fenced", 0, None)
    assert second.rates_from_metrics


def test_without_metrics_records_in_per_second_come_from_the_log_end_offsets_of_the_partitions_led():
    before = {("orders", 0): 10, ("orders", 1): 20}
    _, sample = top.build_snapshot(None, view(), [], before, {}, None, None, 0.0)
    s, _ = top.build_snapshot(None, view(), [], {("orders", 0): 30, ("orders", 1): 25}, {}, None, sample, 5.0)
    rows = {b.node_id: b for b in s.brokers}
    assert (rows[4].rate_in, rows[5].rate_in, rows[4].rate_out) == (4.0, 1.0, None)
    assert not s.rates_from_metrics
    assert "log end offsets" in s.rates_note


def test_under_replicated_offline_and_group_lag():
    log_end = {("orders", 0): 30, ("orders", 1): 25}
    committed = {"billing": {("orders", 0): 30, ("orders", 1): 5}, "idle": {("orders", 0): -1}}
    s, _ = top.build_snapshot(None, view(), [], log_end, committed, None, None, 0.0)
    assert [(p.topic, p.partition) for p in s.under_replicated] == [("orders", 0)]
    assert [(p.topic, p.partition) for p in s.offline] == [("orders", 2)]
    assert [(g.group, g.partition, g.lag) for g in s.groups] == [("billing", 0, 0), ("billing", 1, 20)]


def test_the_counters_are_the_all_topics_series_of_a_metrics_page():
    page = ("# TYPE kafka_server_brokertopicmetrics_bytesin_total counter\n"
            "kafka_server_brokertopicmetrics_bytesin_total 300.0\n"
            'kafka_server_brokertopicmetrics_bytesin_total{topic="a"} 100.0\n'
            "# TYPE kafka_server_brokertopicmetrics_bytesout_total counter\n"
            "kafka_server_brokertopicmetrics_bytesout_total 42.0\n")
    assert top.parse_counters(page) == (300, 42)


def snapshot():
    log_end = {("orders", 0): 30, ("orders", 1): 25}
    return top.build_snapshot(top.parse_quorum(quorum_answer()), view(), [], log_end,
                              {"billing": {("orders", 1): 5}}, None, None, 0.0)[0]


def test_plain_lines_name_each_section():
    lines = top.render_plain(snapshot())
    assert lines[0] == ("quorum: leader 2, epoch 7, high watermark 120, voters 1(lag 0),2(lag 0),3(lag 5), "
                        "observers 4(lag 20)")
    assert "broker 4: unfenced, leader of 1 partitions, records in/s -, out/s -" in lines
    assert "broker 6: fenced, leader of 0 partitions, records in/s -, out/s -" in lines
    assert "under-replicated partitions: 1; orders-0 isr 4,5 of 4,5,6" in lines
    assert "offline partitions: 1; orders-2" in lines
    assert "group billing orders-1: committed 5, log end 25, lag 20" in lines


def test_the_rich_view_has_a_table_per_section():
    from rich.console import Console

    console = Console(record=True, width=120, color_system=None)
    console.print(top.render_rich(snapshot()))
    text = console.export_text()
    for heading in ("Quorum", "Brokers", "Partitions: 1 under-replicated, 1 offline", "Consumer group lag",
                    "leader 2, epoch 7, high watermark 120"):
        assert heading in text, text
    assert "orders-2" in text and "offline" in text and "billing" in text


def test_metrics_addresses_are_id_and_url():
    assert top.parse_metrics(["4=http://127.0.0.1:9404"]) == {4: "http://127.0.0.1:9404"}
    try:
        top.parse_metrics(["127.0.0.1:9404"])
    except ValueError as e:
        assert "--metrics" in str(e)
    else:
        raise AssertionError("a bad --metrics was taken")
