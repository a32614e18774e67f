"""MetadataImage.records(): a snapshot's content rebuilds the same image, through the record codec."""
from metadata.configs import TOPIC_RESOURCE
from metadata.image import MetadataImage
from protocol import messages as M
from protocol.metadata_records import decode_record, encode_record


def replayed(records) -> MetadataImage:
    image = MetadataImage()
    for offset, record in enumerate(records):
        image.replay(offset, decode_record(encode_record(record))[2])
    return image


def view(image: MetadataImage):
    return (
        {n: (t.topic_id, {p: vars(s) for p, s in t.partitions.items()}) for n, t in image.topics.items()},
        image.configs,
        {i: (b.broker_epoch, b.fenced, b.in_controlled_shutdown, b.rack,
             [(e.name, e.host, e.port) for e in b.endpoints])
         for i, b in image.brokers.items()},
        image.features, image.next_producer_id,
    )


def test_records_of_an_image_replay_to_the_same_image():
    tid = bytes(range(16))
    E = M.RegisterBrokerRecord.BrokerEndpoint
    plaintext = E(name="PLAINTEXT", host="127.0.0.1", port=9092, security_protocol=0)
    log = [
        M.FeatureLevelRecord(name="metadata.version", feature_level=21),
        M.RegisterBrokerRecord(broker_id=1, incarnation_id=bytes(16), broker_epoch=5,
                               end_points=[plaintext],
                               rack="r1", fenced=True),
        M.UnfenceBrokerRecord(id=1, epoch=5),
        M.TopicRecord(name="t", topic_id=tid),
        M.PartitionRecord(partition_id=0, topic_id=tid, replicas=[1], isr=[1], leader=1, leader_epoch=0,
                          partition_epoch=0),
        M.PartitionChangeRecord(partition_id=0, topic_id=tid, leader=1),
        M.ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name="t", name="retention.ms", value="1000"),
        M.ProducerIdsRecord(broker_id=1, broker_epoch=5, next_producer_id=2000),
    ]
    image = replayed(log)
    again = replayed(image.records())
    assert view(again) == view(image)
    assert again.topics["t"].partitions[0].leader_epoch == 1
    assert not again.brokers[1].fenced


def test_partition_change_replay_moves_epochs_and_kip966_fields_and_round_trips():
    tid = bytes(range(16))
    E = M.RegisterBrokerRecord.BrokerEndpoint
    plaintext = E(name="PLAINTEXT", host="127.0.0.1", port=9092, security_protocol=0)
    log = [
        M.RegisterBrokerRecord(broker_id=1, incarnation_id=bytes(16), broker_epoch=0, end_points=[plaintext]),
        M.RegisterBrokerRecord(broker_id=2, incarnation_id=bytes(16), broker_epoch=1, end_points=[plaintext]),
        M.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=0, fenced=-1),
        M.BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=1, fenced=-1),
        M.BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=1, in_controlled_shutdown=1),
        M.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=99, fenced=1),  # stale: ignored
        M.TopicRecord(name="t", topic_id=tid),
        M.PartitionRecord(partition_id=0, topic_id=tid, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1,
                          leader_epoch=0, partition_epoch=0),
        M.PartitionChangeRecord(partition_id=0, topic_id=tid, isr=[1, 2]),  # partition epoch only
        M.PartitionChangeRecord(partition_id=0, topic_id=tid, isr=[], leader=-1,
                                eligible_leader_replicas=[1, 2], last_known_elr=[1]),
        M.PartitionChangeRecord(partition_id=0, topic_id=tid, isr=[3], leader=3, leader_recovery_state=1,
                                eligible_leader_replicas=[]),
    ]
    image = replayed(log)
    p = image.topics["t"].partitions[0]
    assert (p.leader, p.isr, p.elr, p.last_known_elr, p.leader_recovery_state) == (3, [3], [], [1], 1)
    assert (p.leader_epoch, p.partition_epoch) == (2, 3)
    assert not image.brokers[1].fenced and image.brokers[2].in_controlled_shutdown
    assert image.active_brokers() == [1]
    again = replayed(image.records())
    assert view(again) == view(image)
    leaderless = replayed(log[:-1])
    assert view(replayed(leaderless.records())) == view(leaderless)
    assert leaderless.topics["t"].partitions[0].elr == [1, 2]
