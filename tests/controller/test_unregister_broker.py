"""UnregisterBroker (API 64) on the active controller, as Kafka's
ReplicationControlManager.unregisterBroker: an unknown broker is BROKER_ID_NOT_REGISTERED; a
registered one, fenced or not, leaves every ISR and leadership and then its registration goes
(UnregisterBrokerRecord with its epoch)."""
from metadata.image import NO_LEADER
from protocol import messages as M
from protocol.errors import Error
from tests.controller.scenario import Scenario


def test_unregistering_an_unknown_broker_is_broker_id_not_registered():
    s = Scenario(brokers=1)
    response = s.apply(s.cluster.unregister(s.image, 7))
    assert response.error_code == Error.BROKER_ID_NOT_REGISTERED
    assert response.error_message == "Broker ID 7 is not currently registered"
    assert s.last_records == [] and set(s.image.brokers) == {1}


def test_unregistering_a_fenced_broker_removes_its_registration_with_its_epoch():
    s = Scenario(brokers=3)
    s.create_topic("t", partitions=2, rf=2)
    s.commit(s.cluster.fence(s.image, [3]))
    epoch = s.epoch(3)
    response = s.apply(s.cluster.unregister(s.image, 3))
    assert response.error_code == Error.NONE and response.error_message is None
    assert s.last_records[-1] == M.UnregisterBrokerRecord(broker_id=3, broker_epoch=epoch)
    assert 3 not in s.image.brokers and 3 not in s.cluster.sessions
    assert all(3 not in s.partition("t", i).isr for i in range(2))


def test_unregistering_an_active_broker_first_moves_its_leaderships_and_isr_places():
    s = Scenario(brokers=2)
    s.create_topic("t", partitions=1, rf=2)
    leader = s.partition("t").leader
    s.apply(s.cluster.unregister(s.image, leader))
    other = 2 if leader == 1 else 1
    assert isinstance(s.last_records[0], M.PartitionChangeRecord)
    assert s.partition("t").leader == other and s.partition("t").isr == [other]
    assert leader not in s.image.brokers
    assert s.partition("t").leader != NO_LEADER
