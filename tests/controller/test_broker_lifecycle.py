"""Broker lifecycle on the active controller: registration, heartbeats, fencing, controlled
shutdown, fast fencing on a closed connection (cluster_control, driven by tests/controller/scenario)."""
from metadata.image import NO_LEADER
from protocol import messages as M
from protocol.errors import Error
from tests.controller.scenario import DISCONNECT_FENCE_MS, SESSION_MS, Scenario, leader_changes


def test_registration_gives_a_new_broker_epoch_and_starts_fenced():
    s = Scenario(brokers=0)
    first = s.register(1)
    assert first.error_code == Error.NONE
    assert s.fenced(1) and s.epoch(1) == first.broker_epoch
    s.heartbeat(1)
    s.cluster.connection_closed(s.connections[1], s.now)  # that process is gone
    again = s.register(1, new_incarnation=True)
    assert again.broker_epoch > first.broker_epoch
    assert s.fenced(1), "a new incarnation starts fenced"


def test_the_same_incarnation_registering_again_keeps_its_epoch_and_state():
    s = Scenario(brokers=1)
    epoch = s.epoch(1)
    assert s.register(1).broker_epoch == epoch
    assert not s.fenced(1)


def test_heartbeat_unfences_only_once_the_metadata_offset_reaches_the_registration():
    s = Scenario(brokers=0)
    epoch = s.register(1).broker_epoch
    behind = s.heartbeat(1, metadata_offset=epoch - 1)
    assert behind.is_fenced and not behind.is_caught_up and s.fenced(1)
    caught_up = s.heartbeat(1, metadata_offset=epoch)
    assert not caught_up.is_fenced and caught_up.is_caught_up and not s.fenced(1)


def test_heartbeat_with_another_broker_epoch_is_stale():
    s = Scenario(brokers=1)
    assert s.heartbeat(1, broker_epoch=s.epoch(1) + 100).error_code == Error.STALE_BROKER_EPOCH
    s.commit([])
    assert s.heartbeat(1).error_code == Error.NONE


def test_a_broker_without_a_heartbeat_for_the_session_timeout_is_fenced():
    s = Scenario(brokers=3)
    s.advance(SESSION_MS)
    s.heartbeat_all(skip=(3,))
    assert s.tick() == [], "a session of exactly the timeout is still valid"
    s.advance(1)
    s.heartbeat_all(skip=(3,))
    s.tick()
    assert s.fenced(3) and not s.fenced(1) and not s.fenced(2)


def test_fencing_removes_broker_from_isr_and_elects_in_same_batch():
    s = Scenario(brokers=3)
    s.create_topic("t", partitions=6, rf=3)
    led_by_2 = [i for i, p in s.image.topics["t"].partitions.items() if p.leader == 2]
    assert led_by_2, "placement gives broker 2 leaderships"
    s.advance(SESSION_MS + 1)
    s.heartbeat_all(skip=(2,))
    batches_before = len(s.batches)
    records = s.tick()
    assert len(s.batches) == batches_before + 1, "one batch"
    assert isinstance(records[-1], M.BrokerRegistrationChangeRecord) and records[-1].fenced == 1
    changes = leader_changes(records)
    assert sorted(changes) == sorted(led_by_2) and 2 not in changes.values()
    for i, p in s.image.topics["t"].partitions.items():
        assert 2 not in p.isr and p.leader in p.isr, (i, p)


def test_unfencing_elects_the_broker_where_partitions_have_no_leader():
    s = Scenario(brokers=1, elr=False)
    s.create_topic("solo", partitions=2, rf=1)
    s.advance(SESSION_MS + 1)
    s.tick()
    assert all(p.leader == NO_LEADER and p.isr == [1] for p in s.image.topics["solo"].partitions.values())
    s.heartbeat(1)
    assert all(p.leader == 1 for p in s.image.topics["solo"].partitions.values())


def test_controlled_shutdown_moves_leaderships_and_isr_before_granting():
    s = Scenario(brokers=3)
    s.create_topic("t", partitions=6, rf=3)
    first = s.heartbeat(2, want_shut_down=True)
    assert not first.should_shut_down and not first.is_fenced
    batch = s.last_records
    assert isinstance(batch[0], M.BrokerRegistrationChangeRecord) and batch[0].in_controlled_shutdown == 1
    assert s.image.brokers[2].in_controlled_shutdown
    for p in s.image.topics["t"].partitions.values():
        assert p.leader != 2 and 2 not in p.isr
    # Not before every active broker has replayed the batch that moved the leaderships away.
    shutdown_batch_end = s.next_offset - 1
    s.heartbeat(1, metadata_offset=shutdown_batch_end - 1)
    s.heartbeat(3, metadata_offset=shutdown_batch_end)
    assert not s.heartbeat(2, want_shut_down=True).should_shut_down
    s.heartbeat(1, metadata_offset=shutdown_batch_end)
    granted = s.heartbeat(2, want_shut_down=True)
    assert granted.should_shut_down and granted.is_fenced and s.fenced(2)


def test_a_broker_that_leads_nothing_is_granted_shutdown_at_once():
    s = Scenario(brokers=3)
    s.create_topic("t", partitions=1, rf=1, assignments={0: [1]})
    answer = s.heartbeat(3, want_shut_down=True)
    assert answer.should_shut_down and s.fenced(3)


def assert_fenced_after_the_grace_period(s: Scenario, broker_id: int) -> None:
    """Not fenced a millisecond before strom.broker.disconnect.fence.ms, fenced at it: out of
    every ISR of topic "t" and leading none of its partitions."""
    s.advance(DISCONNECT_FENCE_MS - 1)
    assert s.tick() == [] and not s.fenced(broker_id)
    s.advance(1)
    s.tick()
    assert s.fenced(broker_id)
    partitions = s.image.topics["t"].partitions.values()
    assert all(broker_id not in p.isr and p.leader != broker_id for p in partitions)


def test_a_closed_heartbeat_connection_fences_after_the_grace_period():
    s = Scenario(brokers=3)
    s.create_topic("t", partitions=3, rf=3)
    s.cluster.connection_closed(s.connections[2], s.now)
    assert_fenced_after_the_grace_period(s, 2)


def test_a_closed_connection_whose_broker_refuses_connections_fences_at_the_next_tick():
    """The listener of a dead process refuses connections: no need to wait out the grace."""
    s = Scenario(brokers=3)
    s.create_topic("t", partitions=3, rf=3)
    s.cluster.connection_closed(s.connections[2], s.now)
    assert s.cluster.broker_of(s.connections[2]) == 2
    s.cluster.listener_refused(2, s.now)
    s.tick()
    assert s.fenced(2)


def test_a_refused_probe_after_a_heartbeat_on_a_new_connection_fences_nothing():
    s = Scenario(brokers=3)
    s.cluster.connection_closed(s.connections[2], s.now)
    s.heartbeat(2, connection=object())  # it came back (a new process, or a new connection)
    s.cluster.listener_refused(2, s.now)
    assert s.tick() == [] and not s.fenced(2)


def test_a_refused_probe_fences_nothing_when_fast_fencing_is_off():
    s = Scenario(brokers=3, disconnect_fence_ms=-1)
    s.cluster.connection_closed(s.connections[2], s.now)
    s.cluster.listener_refused(2, s.now)
    s.advance(DISCONNECT_FENCE_MS * 10)
    assert s.tick() == [] and not s.fenced(2)


def test_a_refused_probe_while_the_heartbeat_connection_is_open_fences_nothing():
    s = Scenario(brokers=3)
    s.cluster.listener_refused(2, s.now)  # an advertised address this controller cannot reach
    s.advance(DISCONNECT_FENCE_MS * 2)
    assert s.tick() == [] and not s.fenced(2)


def test_a_broker_whose_listener_refuses_when_a_controller_activates_is_fenced_after_the_grace_period():
    """The active controller and a broker died together: the new controller never saw the
    broker's connection close, but its listener refusing is the same sign of a dead process."""
    s = Scenario(brokers=3)
    s.create_topic("t", partitions=3, rf=3)
    s.cluster.activate(s.image, s.now)  # a new active controller: no broker heard from yet
    s.cluster.listener_refused(2, s.now)
    assert_fenced_after_the_grace_period(s, 2)
    assert not s.fenced(1) and not s.fenced(3)


def test_a_broker_that_heartbeats_to_a_new_controller_within_the_grace_is_not_fenced_by_a_refused_probe():
    s = Scenario(brokers=3)
    s.cluster.activate(s.image, s.now)
    s.cluster.listener_refused(2, s.now)  # its listener was not reachable from here
    s.advance(DISCONNECT_FENCE_MS - 1)
    s.heartbeat(2, connection=object())
    s.advance(DISCONNECT_FENCE_MS * 2)
    assert s.tick() == [] and not s.fenced(2)


def test_reconnected_broker_is_never_fenced():
    s = Scenario(brokers=3)
    old = s.connections[2]
    s.cluster.connection_closed(old, s.now)
    s.advance(DISCONNECT_FENCE_MS // 5)
    s.heartbeat(2, connection=object())  # the broker's first act on its new connection
    s.advance(DISCONNECT_FENCE_MS * 10)
    s.heartbeat_all()
    assert s.tick() == [] and not s.fenced(2)


def test_close_of_an_older_connection_after_a_heartbeat_on_a_newer_one_is_ignored():
    s = Scenario(brokers=3)
    old = s.connections[2]
    s.heartbeat(2, connection=object())
    s.cluster.connection_closed(old, s.now)
    s.advance(DISCONNECT_FENCE_MS * 2)
    assert s.tick() == [] and not s.fenced(2)


def test_network_partition_without_close_falls_back_to_the_session_timeout():
    s = Scenario(brokers=3)
    s.advance(SESSION_MS // 2)
    s.heartbeat_all(skip=(3,))
    assert s.tick() == [] and not s.fenced(3), "no close: the grace period does not apply"
    s.advance(SESSION_MS // 2 + 1)
    s.heartbeat_all(skip=(3,))
    s.tick()
    assert s.fenced(3)


def test_a_new_active_controller_starts_every_session_afresh():
    s = Scenario(brokers=3)
    s.advance(SESSION_MS * 5)  # no heartbeat reached the previous controller's clock either
    s.cluster.activate(s.image, s.now)
    assert s.tick() == []
    s.advance(SESSION_MS + 1)
    s.tick()
    assert all(s.fenced(b) for b in (1, 2, 3))


def test_another_incarnation_is_refused_while_the_registered_one_has_a_live_session():
    s = Scenario(brokers=3)
    registered = s.connections[2]
    assert s.register(2, new_incarnation=True).error_code == Error.DUPLICATE_BROKER_REGISTRATION
    s.cluster.connection_closed(registered, s.now)  # the registered process is gone
    assert s.register(2, new_incarnation=True).error_code == Error.NONE


def test_a_new_incarnation_leaves_isr_and_leaderships_in_the_registration_batch():
    s = Scenario(brokers=3)
    s.create_topic("t", partitions=3, rf=3)
    s.advance(SESSION_MS + 1)
    s.heartbeat_all()
    s.cluster.connection_closed(s.connections[2], s.now)  # killed: restarted at once
    s.register(2, new_incarnation=True)
    batch = s.last_records
    assert isinstance(batch[0], M.RegisterBrokerRecord) and batch[0].broker_epoch == s.epoch(2)
    assert all(2 not in p.isr and p.leader != 2 for p in s.image.topics["t"].partitions.values())


def test_unclean_restart_leaves_the_elr_and_a_clean_one_keeps_it():
    for clean in (False, True):
        s = Scenario(brokers=3, min_isr=2)
        s.create_topic("t", partitions=1, rf=3, assignments={0: [1, 2, 3]})
        s.heartbeat(3, want_shut_down=True)  # out of the ISR: {1, 2}, still at min ISR
        s.heartbeat_all()
        assert s.heartbeat(3, want_shut_down=True).should_shut_down
        s.heartbeat(2, want_shut_down=True)  # ISR {1} < 2: broker 2 becomes eligible (ELR)
        assert s.partition("t").isr == [1] and s.partition("t").elr == [2]
        s.heartbeat_all()
        old_epoch = s.epoch(2)
        assert s.heartbeat(2, want_shut_down=True).should_shut_down
        s.register(2, new_incarnation=True, previous_epoch=old_epoch if clean else -1)
        assert s.partition("t").elr == ([2] if clean else [])


def test_a_heartbeat_waiting_its_turn_still_keeps_a_reconnected_broker_alive():
    s = Scenario(brokers=3)
    s.cluster.connection_closed(s.connections[2], s.now)
    s.advance(10)
    new = object()
    s.cluster.heard_from(s.image, 2, s.epoch(2), s.now, new)  # arrived; decided later
    s.advance(DISCONNECT_FENCE_MS * 2)
    s.heartbeat_all(skip=(2,))
    assert s.tick() == [] and not s.fenced(2)


# ---- the features a registering broker must support (ClusterControlManager.registerBroker) ----

SUPPORTS_ALL = (("metadata.version", 1, 25), ("eligible.leader.replicas.version", 0, 1))


def test_a_broker_whose_range_excludes_a_finalized_level_is_refused_registration():
    s = Scenario(brokers=0)  # metadata.version 25 and eligible.leader.replicas.version 1 finalized
    refused = s.register(1, features=(("metadata.version", 1, 24),
                                      ("eligible.leader.replicas.version", 0, 1)))
    assert refused.error_code == Error.UNSUPPORTED_VERSION
    assert 1 not in s.image.brokers


def test_a_broker_that_does_not_list_a_finalized_feature_is_refused_registration():
    # "We also need to check every controller feature is supported by the broker": a finalized
    # level other than 0 of a feature the broker does not name is one it cannot support.
    s = Scenario(brokers=0)
    refused = s.register(1, features=(("metadata.version", 1, 25),))
    assert refused.error_code == Error.UNSUPPORTED_VERSION
    assert 1 not in s.image.brokers
    assert s.register(1, features=SUPPORTS_ALL).error_code == Error.NONE


def test_a_broker_listing_a_feature_the_cluster_has_not_finalized_must_support_its_level_0():
    s = Scenario(brokers=0)  # transaction.version not finalized: level 0
    refused = s.register(1, features=SUPPORTS_ALL + (("transaction.version", 1, 2),))
    assert refused.error_code == Error.UNSUPPORTED_VERSION
    assert s.register(1, features=SUPPORTS_ALL + (("transaction.version", 0, 2),)).error_code == Error.NONE


def test_a_broker_that_lists_no_metadata_version_supports_only_the_first_kraft_level():
    s = Scenario(brokers=0)  # metadata.version 25
    refused = s.register(1, features=(("eligible.leader.replicas.version", 0, 1),))
    assert refused.error_code == Error.UNSUPPORTED_VERSION
    assert 1 not in s.image.brokers
