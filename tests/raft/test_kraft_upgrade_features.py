"""UpdateFeatures for kraft.version, as Kafka's FeatureControlManager hands it to the raft leader
(upgradeKRaftVersion): the controller's FeatureControl over a real raft leader's core."""
from controller.feature_control import FeatureControl
from metadata.image import BrokerState, MetadataImage
from protocol import messages as M
from protocol.errors import Error
from raft.voters import KRaftVersion
from tests.raft.test_kraft_upgrade import started

UPGRADE, SAFE_DOWNGRADE = 1, 2
F = M.RegisterBrokerRecord.BrokerFeature
ALL_PREFIX = "The update failed for all features since the following feature had an error: "
INVALID = "Invalid update version {} for feature kraft.version. "


class LeaderAccess:
    """kraft.version through the scenario cluster's leader, as the controller's shell gives it."""

    def __init__(self, cluster):
        self.cluster = cluster

    def kraft_version(self) -> int:
        return self.cluster.cores[self.cluster.leader()].kraft_version

    def upgrade_kraft_version(self, version: int, validate_only: bool) -> None:
        leader = self.cluster.leader()
        ready = self.cluster.cores[leader].upgrade_kraft_version(self.cluster.now, version, validate_only)
        self.cluster.process(leader, ready)


def image(kraft_range=(0, 1)) -> MetadataImage:
    img = MetadataImage()
    img.features.update({"metadata.version": 25})
    features = [F(name="metadata.version", min_supported_version=1, max_supported_version=25)]
    if kraft_range is not None:
        features.append(F(name="kraft.version", min_supported_version=kraft_range[0],
                          max_supported_version=kraft_range[1]))
    img.brokers[1] = BrokerState(1, b"\0" * 16, 10, [], None, fenced=False, features=features)
    return img


def update(cluster, img, *changes, validate_only=False):
    R = M.UpdateFeaturesRequest
    req = R(feature_updates=[R.FeatureUpdateKey(feature=name, max_version_level=level, upgrade_type=kind,
                                                allow_downgrade=kind != UPGRADE)
                             for name, level, kind in changes], validate_only=validate_only)
    return FeatureControl(node_id=1).update_features(img, req, 2, LeaderAccess(cluster))


def leader_log(cluster):
    return [e.value for e in cluster.logs[cluster.leader()].entries]


def test_kraft_version_upgrade_appends_the_raft_control_batch_and_waits_on_a_noop_record():
    cluster = started()
    result = update(cluster, image(), ("kraft.version", 1, UPGRADE))
    assert result.response.error_code == Error.NONE
    assert [type(r).__name__ for r in result.records] == ["NoOpRecord"]
    assert KRaftVersion(1) in leader_log(cluster)
    cluster.run(100)
    assert all(cluster.cores[i].kraft_version == 1 for i in (1, 2, 3))


def test_kraft_version_validate_only_checks_with_the_raft_leader_and_writes_nothing():
    cluster = started()
    before = leader_log(cluster)
    result = update(cluster, image(), ("kraft.version", 1, UPGRADE), validate_only=True)
    assert result.response.error_code == Error.NONE and result.records == []
    assert leader_log(cluster) == before
    cluster.cores[cluster.leader()].state.replicas[min({1, 2, 3} - {cluster.leader()})].directory_id = None
    result = update(cluster, image(), ("kraft.version", 1, UPGRADE), validate_only=True)
    assert result.response.error_code == Error.INVALID_UPDATE_VERSION
    assert result.response.error_message.startswith(ALL_PREFIX + "Directory id must be known")


def test_kraft_version_downgrade_is_refused():
    cluster = started()
    update(cluster, image(), ("kraft.version", 1, UPGRADE))
    cluster.run(100)
    result = update(cluster, image(), ("kraft.version", 0, SAFE_DOWNGRADE))
    assert result.response.error_code == Error.INVALID_UPDATE_VERSION
    assert result.response.error_message == (ALL_PREFIX + INVALID.format(0)
                                             + "Can't downgrade the version of this feature.")
    result = update(cluster, image(), ("kraft.version", 0, UPGRADE))
    assert result.response.error_message.endswith(
        "Can't downgrade the version of this feature without setting the upgrade type to either safe or "
        "unsafe downgrade.")


def test_kraft_version_upgrade_the_voters_refuse_answers_their_message():
    cluster = started()
    cluster.cores[cluster.leader()].state.replicas[min({1, 2, 3} - {cluster.leader()})].directory_id = None
    before = leader_log(cluster)
    result = update(cluster, image(), ("kraft.version", 1, UPGRADE))
    assert result.response.error_code == Error.INVALID_UPDATE_VERSION and result.records == []
    assert result.response.error_message.startswith(ALL_PREFIX + "Directory id must be known for all")
    assert leader_log(cluster) == before


def test_kraft_version_needs_every_registered_broker_to_support_it():
    cluster = started()
    result = update(cluster, image(kraft_range=None), ("kraft.version", 1, UPGRADE))
    assert result.response.error_message == (ALL_PREFIX + INVALID.format(1)
                                             + "Broker 1 does not support this feature.")
    assert cluster.cores[cluster.leader()].kraft_version == 0


def test_kraft_version_is_upgraded_only_once_every_other_feature_is_accepted():
    cluster = started()
    before = leader_log(cluster)
    result = update(cluster, image(), ("kraft.version", 1, UPGRADE), ("metadata.version", 2, UPGRADE))
    assert result.response.error_code == Error.INVALID_UPDATE_VERSION
    assert leader_log(cluster) == before and cluster.cores[cluster.leader()].kraft_version == 0
