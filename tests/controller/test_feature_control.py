"""UpdateFeatures on the controller, as Kafka's FeatureControlManager.updateFeatures decides it:
every registered broker's and this controller's supported range, upgrade against
SAFE_DOWNGRADE and UNSAFE_DOWNGRADE, metadata.version's own rules, the dependencies between
features, validate_only, and the answer's shape per version."""
from controller.feature_control import FeatureControl
from metadata.image import BrokerState, MetadataImage
from protocol import messages as M
from protocol.errors import Error
from protocol.metadata_records import decode_record, encode_record

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
F = M.RegisterBrokerRecord.BrokerFeature
ALL_PREFIX = "The update failed for all features since the following feature had an error: "


def image(mv: int = 25, elr: int = 1, txn: int = 2, broker_features=None) -> MetadataImage:
    img = MetadataImage()
    img.features.update({"metadata.version": mv, "eligible.leader.replicas.version": elr,
                         "transaction.version": txn})
    default = [F(name="metadata.version", min_supported_version=1, max_supported_version=25),
               F(name="eligible.leader.replicas.version", min_supported_version=0, max_supported_version=1),
               F(name="transaction.version", min_supported_version=0, max_supported_version=2)]
    for broker_id in (1, 2):
        features = (broker_features or {}).get(broker_id, default)
        img.brokers[broker_id] = BrokerState(broker_id, b"\0" * 16, 10, [], None, fenced=False,
                                             features=features)
    return img


def update(img, *changes, version=2, validate_only=False):
    R = M.UpdateFeaturesRequest
    req = R(feature_updates=[R.FeatureUpdateKey(feature=name, max_version_level=level, upgrade_type=kind,
                                                allow_downgrade=kind != UPGRADE)
                             for name, level, kind in changes], validate_only=validate_only)
    return FeatureControl(node_id=3000).update_features(img, req, version)


def replay(img, records):
    for offset, r in enumerate(records, start=img.last_offset + 1):
        img.replay(offset, decode_record(encode_record(r))[2])


def test_upgrade_writes_one_feature_level_record_per_feature_and_the_image_follows():
    img = image(mv=21, elr=0, txn=0)
    result = update(img, ("metadata.version", 25, UPGRADE), ("transaction.version", 2, UPGRADE))
    assert result.response.error_code == Error.NONE and result.response.error_message is None
    assert [(r.name, r.feature_level) for r in result.records] == [("metadata.version", 25),
                                                                   ("transaction.version", 2)]
    replay(img, result.records)
    assert img.features["metadata.version"] == 25 and img.features["transaction.version"] == 2


def test_level_zero_removes_a_feature_as_a_safe_downgrade():
    img = image()
    result = update(img, ("transaction.version", 0, SAFE_DOWNGRADE))
    assert result.response.error_code == Error.NONE
    replay(img, result.records)
    assert "transaction.version" not in img.features


def test_validate_only_checks_and_writes_nothing():
    result = update(image(mv=21, txn=0), ("transaction.version", 2, UPGRADE), validate_only=True)
    assert result.response.error_code == Error.NONE and result.records == []


def test_a_downgrade_needs_a_downgrade_type_and_an_upgrade_refuses_one():
    result = update(image(), ("transaction.version", 1, UPGRADE))
    assert result.response.error_code == Error.INVALID_UPDATE_VERSION
    assert result.response.error_message == ALL_PREFIX + (
        "Invalid update version 1 for feature transaction.version. Can't downgrade the version of this "
        "feature without setting the upgrade type to either safe or unsafe downgrade.")
    assert result.records == []
    result = update(image(txn=1), ("transaction.version", 2, SAFE_DOWNGRADE))
    assert result.response.error_message == ALL_PREFIX + (
        "Invalid update version 2 for feature transaction.version. Can't downgrade to a newer version.")


def test_a_level_outside_a_registered_brokers_range_is_refused_naming_the_broker():
    old = [F(name="metadata.version", min_supported_version=1, max_supported_version=21)]
    result = update(image(mv=21, txn=0, broker_features={2: old}), ("transaction.version", 1, UPGRADE))
    assert result.response.error_code == Error.INVALID_UPDATE_VERSION
    assert result.response.error_message == ALL_PREFIX + (
        "Invalid update version 1 for feature transaction.version. Broker 2 does not support this feature.")
    result = update(image(mv=20, broker_features={2: old}), ("metadata.version", 25, UPGRADE))
    assert result.response.error_message == ALL_PREFIX + (
        "Invalid update version 25 for feature metadata.version. Broker 2 only supports versions 1-21")


def test_a_feature_the_controller_does_not_know_is_refused_by_the_local_controller():
    result = update(image(), ("no.such.feature", 1, UPGRADE))
    assert result.response.error_message == ALL_PREFIX + (
        "Invalid update version 1 for feature no.such.feature. Local controller 3000 does not support "
        "this feature.")
    result = update(image(), ("metadata.version", 26, UPGRADE))
    assert result.response.error_message == ALL_PREFIX + (
        "Invalid update version 26 for feature metadata.version. Local controller 3000 only supports "
        "versions 1-25")


def test_a_negative_level_and_an_unknown_upgrade_type_are_refused():
    result = update(image(), ("transaction.version", -1, SAFE_DOWNGRADE))
    assert result.response.error_message == ALL_PREFIX + (
        "Invalid update version -1 for feature transaction.version. A feature version cannot be less than 0.")
    result = update(image(), ("transaction.version", 2, 7))
    assert result.response.error_message == ALL_PREFIX + (
        "Invalid update version 2 for feature transaction.version. The controller does not support the "
        "given upgrade type.")


def test_metadata_version_below_3_3_iv0_is_refused():
    result = update(image(mv=5), ("metadata.version", 3, SAFE_DOWNGRADE))
    assert result.response.error_message == ALL_PREFIX + (
        "Invalid metadata.version 3. Unable to set a metadata.version less than 3.3-IV0")


def test_metadata_version_downgrade_is_safe_only_across_versions_that_changed_no_metadata():
    result = update(image(mv=25, elr=0), ("metadata.version", 24, SAFE_DOWNGRADE))  # 4.0-IV3 -> IV2
    assert result.response.error_code == Error.NONE
    assert [(r.name, r.feature_level) for r in result.records] == [("metadata.version", 24)]
    result = update(image(mv=25, elr=0), ("metadata.version", 22, SAFE_DOWNGRADE))  # across 4.0-IV1
    assert result.response.error_message == ALL_PREFIX + (
        "Invalid metadata.version 22. Refusing to perform the requested downgrade because it might delete "
        "metadata information.")
    result = update(image(mv=25, elr=0), ("metadata.version", 22, UNSAFE_DOWNGRADE))
    assert result.response.error_message == ALL_PREFIX + (
        "Invalid metadata.version 22. Unsafe metadata downgrade is not supported in this version.")


def test_a_feature_that_depends_on_a_metadata_version_needs_it_in_the_same_request_or_finalized():
    result = update(image(mv=22, elr=0), ("eligible.leader.replicas.version", 1, UPGRADE))
    assert result.response.error_message == ALL_PREFIX + (
        "Invalid update version 1 for feature eligible.leader.replicas.version. "
        "eligible.leader.replicas.version could not be set to 1 because it depends on metadata.version "
        "level 23")
    result = update(image(mv=22, elr=0), ("metadata.version", 23, UPGRADE),
                    ("eligible.leader.replicas.version", 1, UPGRADE))
    assert result.response.error_code == Error.NONE and len(result.records) == 2


def test_one_failed_feature_fails_the_whole_request():
    result = update(image(mv=21, txn=0), ("transaction.version", 2, UPGRADE), ("no.such.feature", 1, UPGRADE))
    assert result.response.error_code == Error.INVALID_UPDATE_VERSION and result.records == []


def test_results_per_feature_up_to_v1_and_none_from_v2():
    v1 = update(image(mv=21, txn=0), ("transaction.version", 2, UPGRADE), version=1).response
    assert [(r.feature, r.error_code) for r in v1.results] == [("transaction.version", Error.NONE)]
    v2 = update(image(mv=21, txn=0), ("transaction.version", 2, UPGRADE), version=2).response
    assert not v2.results


def test_v0_allow_downgrade_is_a_safe_downgrade():
    R = M.UpdateFeaturesRequest
    req = R(feature_updates=[R.FeatureUpdateKey(feature="transaction.version", max_version_level=1,
                                                allow_downgrade=True)])
    result = FeatureControl(node_id=1).update_features(image(), req, 0)
    assert result.response.error_code == Error.NONE
    assert [(r.name, r.feature_level) for r in result.records] == [("transaction.version", 1)]


def test_the_active_controller_serves_update_features_and_commits_before_answering():
    import asyncio

    from tests.controller.test_shell import Controller, run

    async def body():
        async with Controller() as c:
            while "transaction.version" not in c.image.features:
                await asyncio.sleep(0.01)
            conn = await c.connect()
            versions = await conn.request(18, 3, M.ApiVersionsRequest(client_software_name="t",
                                                                       client_software_version="1"))
            served = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
            R = M.UpdateFeaturesRequest
            answer = await conn.request(57, 1, R(feature_updates=[R.FeatureUpdateKey(
                feature="transaction.version", max_version_level=0, upgrade_type=SAFE_DOWNGRADE)]))
            features = dict(c.image.features)
            await conn.close()
            return served.get(57), answer, features
    served, answer, features = run(body())
    assert served == (0, 2)
    assert answer.error_code == Error.NONE
    assert [(r.feature, r.error_code) for r in answer.results] == [("transaction.version", Error.NONE)]
    assert "transaction.version" not in features and features["metadata.version"] == 25


GROUP_VERSION_BROKER = [F(name="metadata.version", min_supported_version=1, max_supported_version=25),
                        F(name="group.version", min_supported_version=0, max_supported_version=1)]


def test_group_version_upgrades_to_1_and_disables_with_a_safe_downgrade():
    img = image(broker_features={1: GROUP_VERSION_BROKER, 2: GROUP_VERSION_BROKER})
    result = update(img, ("group.version", 1, UPGRADE))
    assert result.response.error_code == Error.NONE
    replay(img, result.records)
    assert img.features["group.version"] == 1
    result = update(img, ("group.version", 0, SAFE_DOWNGRADE))
    assert result.response.error_code == Error.NONE
    replay(img, result.records)
    assert "group.version" not in img.features


def test_group_version_above_1_is_refused_by_the_local_controller():
    img = image(broker_features={1: GROUP_VERSION_BROKER, 2: GROUP_VERSION_BROKER})
    result = update(img, ("group.version", 2, UPGRADE))
    assert result.response.error_message == ALL_PREFIX + (
        "Invalid update version 2 for feature group.version. "
        "Local controller 3000 only supports versions 0-1")


def test_group_version_1_is_refused_while_a_broker_does_not_support_it():
    result = update(image(), ("group.version", 1, UPGRADE))
    assert result.response.error_code == Error.INVALID_UPDATE_VERSION
    assert result.response.error_message == ALL_PREFIX + (
        "Invalid update version 1 for feature group.version. Broker 1 does not support this feature.")


def test_group_version_1_depends_on_metadata_version_3_3_iv0_only():
    old = [F(name="metadata.version", min_supported_version=1, max_supported_version=25),
           F(name="group.version", min_supported_version=0, max_supported_version=1)]
    img = image(mv=3, elr=0, txn=0, broker_features={1: old, 2: old})
    result = update(img, ("group.version", 1, UPGRADE))
    assert result.response.error_message == ALL_PREFIX + (
        "Invalid update version 1 for feature group.version. group.version could not be set to 1 because it "
        "depends on metadata.version=4 (3.3-IV0)")
    img = image(mv=4, elr=0, txn=0, broker_features={1: old, 2: old})
    assert update(img, ("group.version", 1, UPGRADE)).response.error_code == Error.NONE
