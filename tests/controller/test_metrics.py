"""The controller's gauges as Kafka's ControllerMetadataMetricsPublisher counts them: offline is
no leader, imbalanced is a leader other than the first replica, fenced and active brokers."""
from controller.metrics import PREFIX, controller_values
from metadata.image import BrokerState, MetadataImage, PartitionState, TopicState


def image() -> MetadataImage:
    img = MetadataImage()
    for broker_id, fenced in ((1, False), (2, False), (3, True)):
        img.brokers[broker_id] = BrokerState(broker_id, b"\0" * 16, 10, [], None, fenced=fenced)
    img.topics["a"] = TopicState("a", b"a" * 16, {
        0: PartitionState([1, 2], [1, 2], 1, 0, 0),      # preferred leader
        1: PartitionState([2, 1], [1], 1, 1, 1),         # led by its second replica
        2: PartitionState([3], [], -1, 2, 2),            # offline: no leader
    })
    img.topics["b"] = TopicState("b", b"b" * 16, {0: PartitionState([2], [2], 2, 0, 0)})
    return img


def test_offline_partitions_are_those_without_a_leader_and_imbalance_counts_non_preferred_leaders():
    values = controller_values(image(), active=True)
    assert values[PREFIX + "globaltopiccount"] == 2
    assert values[PREFIX + "globalpartitioncount"] == 4
    assert values[PREFIX + "offlinepartitionscount"] == 1
    assert values[PREFIX + "preferredreplicaimbalancecount"] == 2  # a-1, and a-2 (no leader)
    assert values[PREFIX + "fencedbrokercount"] == 1
    assert values[PREFIX + "activebrokercount"] == 2


def test_active_controller_count_is_one_only_on_the_active_controller():
    assert controller_values(image(), active=True)[PREFIX + "activecontrollercount"] == 1
    assert controller_values(image(), active=False)[PREFIX + "activecontrollercount"] == 0


class _Controller:
    """What the registration reads of a QuorumController: its image, and its raft (none yet)."""

    def __init__(self, image: MetadataImage) -> None:
        self.state = image
        self.raft = None


def test_registered_gauges_render_in_prometheus_text_format_and_parse():
    from prometheus_client.parser import text_string_to_metric_families

    from controller.metrics import register
    from protocol.metrics import Registry

    registry = Registry()
    register(registry, _Controller(image()))
    samples = {s.name: s.value for f in text_string_to_metric_families(registry.render().decode())
               for s in f.samples}
    assert samples[PREFIX + "offlinepartitionscount"] == 1
    assert samples[PREFIX + "activecontrollercount"] == 0  # no raft: not the active controller
    assert samples["kafka_server_raftmetrics_current_leader"] == 0
