"""The features a broker advertises (KIP-584) for transaction.version 2 (KIP-890 part 2):
ApiVersions' SupportedFeatures and FinalizedFeatures, as Kafka's ApiVersionsResponse answers
them, and the range the broker registers with the controller."""
from __future__ import annotations

import asyncio

from broker.metadata_follower import SUPPORTED_FEATURES, supported_features
from controller.quorum_controller import BOOTSTRAP_FEATURES
from protocol import messages as M
from protocol.dispatch import Dispatcher
from protocol.headers import API_VERSIONS_KEY, RequestHeader


def api_versions(dispatcher: Dispatcher, version: int):
    header = RequestHeader(api_key=API_VERSIONS_KEY, api_version=version, correlation_id=1, client_id="t",
                           header_version=2)
    return asyncio.run(dispatcher.apis[API_VERSIONS_KEY].fn(header, M.ApiVersionsRequest()))


def test_api_versions_v4_answers_the_supported_ranges_and_the_finalized_levels_of_the_image():
    features = {"metadata.version": 25, "transaction.version": 2, "eligible.leader.replicas.version": 1}
    d = Dispatcher([], supported_features(), lambda: (41, features))
    body = api_versions(d, 4)
    ranges = {(f.name, f.min_version, f.max_version) for f in body.supported_features}
    assert ranges == set(SUPPORTED_FEATURES)
    assert ("transaction.version", 0, 2) in SUPPORTED_FEATURES
    assert body.finalized_features_epoch == 41
    assert [(f.name, f.min_version_level, f.max_version_level) for f in body.finalized_features] == [
        ("eligible.leader.replicas.version", 1, 1), ("metadata.version", 25, 25),
        ("transaction.version", 2, 2)]


def test_api_versions_below_v4_never_says_a_range_starts_at_0_as_kafka_since_kafka_17011():
    d = Dispatcher([], supported_features(), lambda: (7, {"transaction.version": 0}))
    body = api_versions(d, 3)
    ranges = {f.name: (f.min_version, f.max_version) for f in body.supported_features}
    assert ranges["transaction.version"] == (1, 2)
    assert ranges["eligible.leader.replicas.version"] == (1, 1)
    assert body.finalized_features == []  # a level 0 is not finalized
    assert body.finalized_features_epoch == 7


def test_a_process_without_an_image_answers_no_finalized_features():
    body = api_versions(Dispatcher([]), 4)
    assert body.finalized_features_epoch == -1 and body.finalized_features == []


def test_the_broker_supports_every_level_a_new_cluster_bootstraps():
    ranges = {name: (lo, hi) for name, lo, hi in SUPPORTED_FEATURES}
    for name, level in BOOTSTRAP_FEATURES:
        assert ranges[name][0] <= level <= ranges[name][1], name
    assert dict(BOOTSTRAP_FEATURES)["transaction.version"] == 2


def test_a_new_cluster_bootstraps_group_version_1_and_brokers_support_0_to_1_as_kafka_4():
    assert dict(BOOTSTRAP_FEATURES)["group.version"] == 1
    assert ("group.version", 0, 1) in SUPPORTED_FEATURES
