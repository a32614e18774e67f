"""strom features' upgrade, downgrade, disable, version-mapping and feature-dependencies as
Kafka's FeatureCommand builds and prints them, from fixed inputs (no cluster)."""
import argparse

import pytest

from protocol import messages as M
from protocol.errors import Error
from strom import features
from strom.cli import build_parser

SAFE, UNSAFE = features.SAFE_DOWNGRADE, features.UNSAFE_DOWNGRADE


def args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["features", "--bootstrap-server", "127.0.0.1:9092", *argv])


def test_upgrade_features_each_with_its_level_and_the_deprecated_metadata_flag_noted():
    updates, notes = features.planned_updates(
        args("upgrade", "--metadata", "3.9-IV0", "--feature", "transaction.version=2"), "upgrade")
    assert updates == {"metadata.version": (21, 1), "transaction.version": (2, 1)}
    assert notes == [" `metadata` flag is deprecated and may be removed in a future release."]


def test_release_version_sets_metadata_version_and_each_features_level_at_that_release():
    updates, _ = features.planned_updates(args("upgrade", "--release-version", "4.0-IV3"), "upgrade")
    assert updates == {"metadata.version": (25, 1), "transaction.version": (2, 1), "group.version": (1, 1),
                       "eligible.leader.replicas.version": (1, 1)}
    # an upgrade never asks for level 0; a downgrade does
    updates, _ = features.planned_updates(args("upgrade", "--release-version", "3.9"), "upgrade")
    assert updates == {"metadata.version": (21, 1)}
    updates, _ = features.planned_updates(args("downgrade", "--release-version", "3.9-IV0", "--unsafe"),
                                          "downgrade")
    assert updates == {"metadata.version": (21, UNSAFE), "transaction.version": (0, UNSAFE),
                       "group.version": (0, UNSAFE), "eligible.leader.replicas.version": (0, UNSAFE)}


def test_release_version_with_other_flags_and_unknown_versions_are_refused_in_kafkas_words():
    with pytest.raises(features.CommandError,
                       match="^Can not specify `release-version` with other feature flags.$"):
        features.planned_updates(args("upgrade", "--release-version", "4.0-IV3", "--feature", "a=1"),
                                 "upgrade")
    with pytest.raises(features.CommandError) as refused:
        features.planned_updates(args("upgrade", "--release-version", "3.2-IV0"), "upgrade")
    assert str(refused.value).startswith("Unknown metadata.version 3.2-IV0. Supported metadata.version are "
                                         "3.3-IV0, 3.3-IV1, ")
    assert str(refused.value).endswith(", 4.0-IV2, 4.0-IV3")


def test_feature_level_strings_and_repeated_features_are_refused_in_kafkas_words():
    with pytest.raises(features.CommandError,
                       match="^Can't parse feature=level string a.b: equals sign not found.$"):
        features.planned_updates(args("upgrade", "--feature", "a.b"), "upgrade")
    with pytest.raises(features.CommandError,
                       match="^Can't parse feature=level string a=x: unable to parse x as a short.$"):
        features.planned_updates(args("upgrade", "--feature", "a=x"), "upgrade")
    with pytest.raises(features.CommandError, match="^Feature a was specified more than once.$"):
        features.planned_updates(args("downgrade", "--feature", "a=1", "--feature", "a=0"), "downgrade")
    with pytest.raises(features.CommandError, match="^Feature a was specified more than once.$"):
        features.planned_updates(args("disable", "--feature", "a", "--feature", "a"), "disable")


def test_disable_is_a_downgrade_to_zero():
    updates, _ = features.planned_updates(args("disable", "--feature", "transaction.version"), "disable")
    assert updates == {"transaction.version": (0, SAFE)}


def test_each_feature_is_reported_by_name_as_done_possible_or_failed():
    updates = {"transaction.version": (2, 1), "metadata.version": (25, 1)}
    assert features.report("upgrade", updates, {}, dry_run=False) == (
        ["metadata.version was upgraded to 25.", "transaction.version was upgraded to 2."], 0)
    assert features.report("upgrade", updates, {}, dry_run=True)[0] == [
        "metadata.version can be upgraded to 25.", "transaction.version can be upgraded to 2."]
    failed = {"metadata.version": "no", "transaction.version": "no"}
    assert features.report("downgrade", updates, failed, dry_run=False) == (
        ["Could not downgrade metadata.version to 25. no",
         "Could not downgrade transaction.version to 2. no"], 2)
    assert features.report("disable", {"x": (0, SAFE)}, {"x": "no"}, dry_run=True)[0] == [
        "Can not disable x. no"]
    assert features.report("disable", {"x": (0, SAFE)}, {}, dry_run=False)[0] == ["x was disabled."]


def test_a_top_level_error_fails_every_feature_with_the_controllers_message():
    R = M.UpdateFeaturesResponse
    updates = {"a": (1, 1), "b": (1, 1)}
    answer = R(error_code=Error.INVALID_UPDATE_VERSION, error_message="The update failed ...")
    assert features.feature_errors(answer, updates) == {"a": "The update failed ...",
                                                        "b": "The update failed ..."}
    answer = R(error_code=Error.NONE, results=[R.UpdatableFeatureResult(feature="a", error_code=Error.NONE)])
    assert features.feature_errors(answer, updates) == {"a": None, "b": None}


def test_version_mapping_prints_the_levels_a_release_sets():
    assert features.version_mapping("3.9-IV0") == ["metadata.version=21 (3.9-IV0)", "transaction.version=0",
                                                   "group.version=0", "eligible.leader.replicas.version=0"]
    assert features.version_mapping("4.0-IV0") == ["metadata.version=22 (4.0-IV0)", "transaction.version=0",
                                                   "group.version=1", "eligible.leader.replicas.version=0"]
    assert features.version_mapping(None)[0] == "metadata.version=25 (4.0-IV3)"
    with pytest.raises(features.CommandError,
                       match=r"^Unknown release version '9.9'. Supported versions are: 3.3-IV0 to 4.0-IV3$"):
        features.version_mapping("9.9")


def test_feature_dependencies_name_each_level_needed():
    assert features.feature_dependencies(["eligible.leader.replicas.version=1", "metadata.version=5",
                                          "transaction.version=2"]) == [
        "eligible.leader.replicas.version=1 requires:", "    metadata.version=23 (4.0-IV1)",
        "metadata.version=5 (3.3-IV1) has no dependencies.", "transaction.version=2 has no dependencies."]
    assert features.feature_dependencies(["group.version=1"]) == ["group.version=1 has no dependencies."]
    with pytest.raises(features.CommandError, match="^Unknown feature: nope$"):
        features.feature_dependencies(["nope=1"])
    with pytest.raises(features.CommandError, match="^Unknown metadata.version 99$"):
        features.feature_dependencies(["metadata.version=99"])
    with pytest.raises(features.CommandError, match="^No feature:transaction.version with feature level 7$"):
        features.feature_dependencies(["transaction.version=7"])


def test_bootstrap_server_and_bootstrap_controller_exclude_each_other():
    with pytest.raises(SystemExit):
        build_parser().parse_args(["features", "--bootstrap-server", "a:1", "--bootstrap-controller", "b:2",
                                   "describe"])
    parsed = build_parser().parse_args(["features", "--bootstrap-controller", "b:2", "describe"])
    assert parsed.bootstrap_controller == "b:2" and parsed.bootstrap_server is None
