"""`strom cluster up` without processes: the directory layout, formatting once and reusing, and
the status lines made from parsed answers (strom/cluster.py, strom/cluster_status.py)."""
import os

import pytest

from engine.errors import ConfigError, LogDirError
from engine.manager import read_meta_properties
from strom.cluster import CLUSTER_FILE, load_layout, plan_layout, prepare
from strom.cluster_status import (
    BrokerAnswer,
    PartitionInfo,
    QuorumAnswer,
    broker_line,
    controller_line,
    reference_view,
)
from strom.config import read_config_file


def test_controllers_take_the_first_node_ids_and_brokers_the_first_ports():
    layout = plan_layout("/d", 3, 3, [9092, 9093, 9094, 9095, 9096, 9097], "cid")
    assert [(c.node_id, c.port) for c in layout.controllers] == [(1, 9095), (2, 9096), (3, 9097)]
    assert [(b.node_id, b.port) for b in layout.brokers] == [(4, 9092), (5, 9093), (6, 9094)]
    assert layout.bootstrap_servers == "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"
    assert layout.brokers[0].config_path == "/d/broker-4/broker.properties"
    assert layout.controllers[0].data_dir == "/d/controller-1/metadata"


def test_no_controller_or_no_broker_is_refused_naming_the_flag():
    with pytest.raises(ConfigError, match="--brokers"):
        plan_layout("/d", 3, 0, [1, 2, 3], "cid")
    with pytest.raises(ConfigError, match="--controllers"):
        plan_layout("/d", 0, 1, [1], "cid")


def test_the_first_up_formats_every_node_and_a_second_reuses_the_directory_as_it_is(tmp_path):
    directory = str(tmp_path / "c")
    layout, formatted = prepare(directory, 3, 2, 0)
    assert formatted and os.path.exists(os.path.join(directory, CLUSTER_FILE))
    for node in layout.nodes:
        config = read_config_file(node.config_path)
        assert config.node_id == node.node_id
        meta = read_meta_properties(node.data_dir)
        assert meta["cluster.id"] == layout.cluster_id and meta["node.id"] == str(node.node_id)
    broker = read_config_file(layout.brokers[0].config_path)
    assert broker["offsets.topic.replication.factor"] == 2  # min(3, brokers)
    assert os.listdir(os.path.join(layout.controllers[0].data_dir, "__cluster_metadata-0"))  # bootstrap

    before = {n.name: read_meta_properties(n.data_dir) for n in layout.nodes}
    again, formatted = prepare(directory, None, None, None)
    assert not formatted and again == layout == load_layout(directory)
    assert {n.name: read_meta_properties(n.data_dir) for n in layout.nodes} == before
    with pytest.raises(ConfigError, match="--controllers"):
        prepare(directory, 1, None, None)


def test_a_directory_left_by_an_interrupted_first_up_is_not_formatted_over(tmp_path):
    directory = str(tmp_path / "c")
    prepare(directory, 1, 1, 0)
    os.unlink(os.path.join(directory, CLUSTER_FILE))  # as if the first up died before its commit
    with pytest.raises(LogDirError, match="already formatted"):
        prepare(directory, 1, 1, 0)


def test_a_controller_line_is_its_own_view_of_the_quorum():
    assert controller_line(1, None) == "not answering"
    assert controller_line(2, QuorumAnswer(2, 5, True, (1, 2, 3), (4, 5))) == \
        "leader, epoch 5, voters 1,2,3, observers 4,5"
    assert controller_line(1, QuorumAnswer(2, 5, False)) == "follower of 2, epoch 5"
    assert controller_line(2, QuorumAnswer(2, 5, False)) == "resigned, epoch 5"
    assert controller_line(1, QuorumAnswer(-1, 6, False)) == "no leader, epoch 6"


def partition(index: int, leader: int, replicas, isr) -> PartitionInfo:
    return PartitionInfo("t", index, leader, 0, tuple(replicas), tuple(isr))


VIEW = BrokerAnswer(frozenset({4, 5}), None, (
    partition(0, 4, (4, 5, 6), (4, 5)),
    partition(1, 5, (5, 6, 4), (5, 4)),
    partition(2, 4, (4, 5), (4,)),
))


def test_a_broker_line_counts_the_partitions_it_leads_and_the_isrs_it_is_in():
    assert broker_line(4, VIEW, (4, VIEW)) == "unfenced, leader of 2 partitions, in 3 of 3 ISRs"
    assert broker_line(5, VIEW, (4, VIEW)) == "unfenced, leader of 1 partitions, in 2 of 3 ISRs"


def test_a_broker_that_does_not_answer_is_described_by_the_reference_view():
    assert broker_line(6, None, (4, VIEW), "not running") == \
        "not running; per broker 4: fenced or not registered, leader of 0 partitions, in 0 of 2 ISRs"
    with_fenced = BrokerAnswer(VIEW.unfenced, frozenset({6}), VIEW.partitions)
    assert broker_line(6, None, (5, with_fenced)).startswith("not answering; per broker 5: fenced,")
    assert broker_line(7, None, (5, with_fenced)).startswith("not answering; per broker 5: not registered,")
    assert broker_line(6, None, None, "starting") == "starting; no broker answers Metadata"


def test_the_reference_view_is_the_lowest_numbered_broker_that_answered():
    assert reference_view({6: VIEW, 4: None, 5: VIEW}) == (5, VIEW)
    assert reference_view({4: None}) is None
