"""UpdateFeatures (key 57) on the active controller, as Kafka's FeatureControlManager decides it.

Each feature asked for is checked in turn, and the first refusal fails the whole request with
INVALID_UPDATE_VERSION (nothing is written): the upgrade type must be one Kafka knows (1
UPGRADE, 2 SAFE_DOWNGRADE, 3 UNSAFE_DOWNGRADE; v0's allow_downgrade is SAFE_DOWNGRADE); the
level must not be negative; it must be within this controller's supported range and within the
range every registered broker announced (RegisterBrokerRecord's features; a feature a broker
did not announce is supported there at 0 only); a lower level needs a downgrade type and a
higher one an upgrade. metadata.version must be a level that exists, not below 3.3-IV0 (the
first with FeatureLevelRecord), and a downgrade across a version that changed the metadata's
format is refused (unsafe downgrades are not supported, as in Kafka). Any other feature at a
level of 1 or more needs metadata.version 3.3-IV0 and its own dependencies (KIP-1022: the
eligible leader replicas need 4.0-IV1; group.version 1, the consumer rebalance protocol of
KIP-848, needs nothing more), read from the levels the request leaves finalized.

kraft.version is not a FeatureLevelRecord (KIP-853): its level is the raft log's, read and
upgraded through a ``KRaftVersionAccess`` (the quorum's leader, raft/kraft_upgrade.py), which
refuses, with its own message, what the voters cannot take; only an upgrade is possible (another
level with a downgrade type: "Can't downgrade the version of this feature."). Every other feature
is checked first; then the upgrade is appended (validate_only: only checked), and a NoOpRecord
is the request's record to wait on, committed after it, as Kafka's FeatureControlManager.

A change is a FeatureLevelRecord per feature, all in one batch; level 0 removes the feature
from the finalized ones. validate_only checks and writes nothing. The answer's message on a
refusal is Kafka's: "The update failed for all features since the following feature had an
error: " and the reason; versions 0 and 1 also answer each feature on success.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from controller.result import ControllerResult
from metadata.image import MetadataImage
from protocol import messages as M
from protocol.errors import Error
from raft.kraft_upgrade import KRaftUpgradeError

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
ELR_FEATURE = "eligible.leader.replicas.version"
TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3

# MetadataVersion's feature levels: release name, and whether it changed the metadata's format
# (didMetadataChange), which decides if a downgrade across it could lose metadata.
METADATA_VERSIONS: dict[int, tuple[str, bool]] = {
    1: ("3.0-IV1", True), 2: ("3.1-IV0", False), 3: ("3.2-IV0", True), 4: ("3.3-IV0", False),
    5: ("3.3-IV1", True), 6: ("3.3-IV2", True), 7: ("3.3-IV3", True), 8: ("3.4-IV0", True),
    9: ("3.5-IV0", False), 10: ("3.5-IV1", False), 11: ("3.5-IV2", True), 12: ("3.6-IV0", False),
    13: ("3.6-IV1", True), 14: ("3.6-IV2", True), 15: ("3.7-IV0", True), 16: ("3.7-IV1", False),
    17: ("3.7-IV2", True), 18: ("3.7-IV3", False), 19: ("3.7-IV4", False), 20: ("3.8-IV0", False),
    21: ("3.9-IV0", False), 22: ("4.0-IV0", False), 23: ("4.0-IV1", True), 24: ("4.0-IV2", False),
    25: ("4.0-IV3", False),
}
MINIMUM_BOOTSTRAP_LEVEL = 4  # 3.3-IV0

# What a controller supports, (min, max) per feature: Kafka's QuorumFeatures' local map.
SUPPORTED: dict[str, tuple[int, int]] = {
    METADATA_VERSION: (1, max(METADATA_VERSIONS)),
    ELR_FEATURE: (0, 1),
    TRANSACTION_VERSION: (0, 2),
    GROUP_VERSION: (0, 1),
    KRAFT_VERSION: (0, 1),
}
DISABLED = (0, 0)

# Each feature level's dependencies on other features' levels (KIP-1022).
DEPENDENCIES: dict[tuple[str, int], dict[str, int]] = {
    (ELR_FEATURE, 1): {METADATA_VERSION: 23},
}
ALL_FAILED = "The update failed for all features since the following feature had an error: "


class _Refused(Exception):
    pass


class KRaftVersionAccess(Protocol):
    """The raft log's kraft.version: read, and upgraded by the quorum's leader."""

    def kraft_version(self) -> int: ...

    def upgrade_kraft_version(self, version: int, validate_only: bool) -> None:
        """Raises KRaftUpgradeError when refused (and the shell's NotController when not leading)."""


def range_text(lo: int, hi: int) -> str:
    """Kafka's VersionRange.toString."""
    if lo == hi:
        return str(lo)
    return f"{lo}+" if hi == 0x7FFF else f"{lo}-{hi}"


def reason_not_supported(level: int, what: str, supported: tuple[int, int]) -> str | None:
    lo, hi = supported
    if lo <= level <= hi:
        return None
    if hi == 0:
        return f"{what} does not support this feature."
    return f"{what} only supports versions {range_text(lo, hi)}"


def metadata_changed(a: int, b: int) -> bool:
    """Did any metadata.version above the lower of ``a`` and ``b`` up to the higher change the
    metadata's format (MetadataVersion.checkIfMetadataChanged)?"""
    lo, hi = sorted((a, b))
    return any(METADATA_VERSIONS.get(v, ("", True))[1] for v in range(lo + 1, hi + 1))


class FeatureControl:
    def __init__(self, node_id: int, supported: dict[str, tuple[int, int]] | None = None):
        self.node_id = node_id
        self.supported = SUPPORTED if supported is None else supported

    def update_features(self, image: MetadataImage, req: Any, version: int,
                        kraft: KRaftVersionAccess | None = None) -> ControllerResult:
        R = M.UpdateFeaturesResponse
        updates: dict[str, tuple[int, int]] = {}
        for u in req.feature_updates:
            kind = (SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE) if version == 0 else u.upgrade_type
            updates[u.feature] = (u.max_version_level, kind)
        proposed = dict(image.features)
        proposed.update({name: level for name, (level, _) in updates.items() if name != KRAFT_VERSION})
        records: list[Any] = []
        try:
            for name, (level, kind) in updates.items():
                if name == KRAFT_VERSION:
                    self._check_kraft_version(image, level, kind, kraft, True)
                else:
                    records.append(self._update(image, name, level, kind, proposed))
            if KRAFT_VERSION in updates and not req.validate_only:
                level, kind = updates[KRAFT_VERSION]
                if self._check_kraft_version(image, level, kind, kraft, False):
                    records.append(M.NoOpRecord())
        except _Refused as e:
            return ControllerResult([], R(error_code=Error.INVALID_UPDATE_VERSION,
                                          error_message=ALL_FAILED + str(e)))
        response = R(error_code=Error.NONE, error_message=None)
        if version <= 1:
            response.results = [R.UpdatableFeatureResult(feature=name, error_code=Error.NONE,
                                                         error_message=None) for name in updates]
        return ControllerResult([] if req.validate_only else records, response)

    def _update(self, image: MetadataImage, name: str, level: int, kind: int,
                proposed: dict[str, int]) -> Any:
        def refuse(message: str) -> _Refused:
            return _Refused(f"Invalid update version {level} for feature {name}. {message}")

        if kind not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            raise refuse("The controller does not support the given upgrade type.")
        current = image.features.get(name, 0)
        self._check_level(image, name, level, kind, current, refuse)
        if name == METADATA_VERSION:
            self._check_metadata_version(current, level, kind == UNSAFE_DOWNGRADE)
        else:
            self._check_dependencies(name, level, proposed, refuse)
        return M.FeatureLevelRecord(name=name, feature_level=level)

    def _check_level(self, image: MetadataImage, name: str, level: int, kind: int, current: int,
                     refuse: Callable[[str], _Refused]) -> None:
        """FeatureControlManager's checks of any feature's new level against its current one: not
        negative, supported by this controller and every broker, and the upgrade type its
        direction needs."""
        if level < 0:
            raise refuse("A feature version cannot be less than 0.")
        reason = self._reason_not_supported(image, name, level)
        if reason is not None:
            raise refuse(reason)
        if level < current and kind == UPGRADE:
            raise refuse("Can't downgrade the version of this feature without setting the upgrade type to "
                         "either safe or unsafe downgrade.")
        if level > current and kind != UPGRADE:
            raise refuse("Can't downgrade to a newer version.")

    def _check_kraft_version(self, image: MetadataImage, level: int, kind: int,
                             kraft: KRaftVersionAccess | None, validate_only: bool) -> bool:
        """True when an upgrade was asked of the raft leader (not validate_only)."""
        def refuse(message: str) -> _Refused:
            return _Refused(f"Invalid update version {level} for feature {KRAFT_VERSION}. {message}")

        if kind not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            raise refuse("The controller does not support the given upgrade type.")
        if kraft is None:
            raise refuse(f"Local controller {self.node_id} does not support this feature.")
        current = kraft.kraft_version()
        self._check_level(image, KRAFT_VERSION, level, kind, current, refuse)
        if kind != UPGRADE:
            if level != current:
                raise refuse("Can't downgrade the version of this feature.")
            return False
        try:
            kraft.upgrade_kraft_version(level, validate_only)
        except KRaftUpgradeError as e:
            raise _Refused(str(e)) from None
        return not validate_only

    def _reason_not_supported(self, image: MetadataImage, name: str, level: int) -> str | None:
        reason = reason_not_supported(level, f"Local controller {self.node_id}",
                                      self.supported.get(name, DISABLED))
        if reason is not None:
            return reason
        for broker_id in sorted(image.brokers):
            ranges = {f.name: (f.min_supported_version, f.max_supported_version)
                      for f in image.brokers[broker_id].features}
            reason = reason_not_supported(level, f"Broker {broker_id}", ranges.get(name, DISABLED))
            if reason is not None:
                return reason
        return None

    @staticmethod
    def _check_metadata_version(current: int, level: int, unsafe: bool) -> None:
        def refuse(message: str) -> _Refused:
            return _Refused(f"Invalid metadata.version {level}. {message}")

        if level not in METADATA_VERSIONS:
            raise refuse("Unknown metadata.version.")
        if level < MINIMUM_BOOTSTRAP_LEVEL:
            raise refuse("Unable to set a metadata.version less than "
                         f"{METADATA_VERSIONS[MINIMUM_BOOTSTRAP_LEVEL][0]}")
        if level < current and metadata_changed(current, level):
            if unsafe:
                raise refuse("Unsafe metadata downgrade is not supported in this version.")
            raise refuse("Refusing to perform the requested downgrade because it might delete metadata "
                         "information.")

    @staticmethod
    def _check_dependencies(name: str, level: int, proposed: dict[str, int], refuse) -> None:
        """Kafka's Features.validateVersion over the levels the request leaves finalized."""
        mv = proposed.get(METADATA_VERSION)
        if level >= 1 and (mv is None or mv < MINIMUM_BOOTSTRAP_LEVEL):
            raise refuse(f"{name} could not be set to {level} because it depends on metadata.version="
                         f"{MINIMUM_BOOTSTRAP_LEVEL} ({METADATA_VERSIONS[MINIMUM_BOOTSTRAP_LEVEL][0]})")
        for dependency, needed in DEPENDENCIES.get((name, level), {}).items():
            have = proposed.get(dependency)
            if have is None or have < needed:
                raise refuse(f"{name} could not be set to {level} because it depends on {dependency} "
                             f"level {needed}")
