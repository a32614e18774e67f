"""strom format's KIP-853 bootstrap choices and strom quorum's requests and output (strom/quorum.py).

No network: the describe output is checked from constructed DescribeQuorum v2 answers, the
requests by a round trip through the codec.
"""
import importlib.util
import os

import pytest

from engine.checkpoint import read_properties, uuid_from_str
from engine.control import parse_control_type
from engine.errors import ConfigError, LogDirError
from ext.batch import decode_records, iter_batches
from protocol import messages as M
from protocol.errors import Error
from protocol.metadata_records import (
    CONTROL_KRAFT_VERSION,
    CONTROL_SNAPSHOT_FOOTER,
    CONTROL_SNAPSHOT_HEADER,
    CONTROL_VOTERS,
)
from protocol.types import Reader, Writer
from raft.voters import Endpoint, Voter
from strom import node, quorum
from strom.cli import main
from strom.config import ServerConfig

U1, U2 = "AAECAwQFBgcICQoLDA0ODw", "EBESExQVFhcYGRobHB0eHw"
U3, U4 = "ICEiIyQlJicoKSorLC0uLw", "MDEyMzQ1Njc4OTo7PD0-Pw"  # U4 has a '-'
BOOTSTRAP_CHECKPOINT = "00000000000000000000-0000000000.checkpoint"
HAS_ENGINE_LOG = importlib.util.find_spec("raft.engine_log") is not None
needs_engine_log = pytest.mark.skipif(
    not HAS_ENGINE_LOG, reason="raft/engine_log.py (write_bootstrap_snapshot) has not landed yet")


def controller_props(tmp_path, node_id=1, **extra):
    props = {
        "process.roles": "controller",
        "node.id": str(node_id),
        "listeners": f"CONTROLLER://:{19090 + node_id}",
        "advertised.listeners": f"CONTROLLER://c{node_id}.example:{19090 + node_id}",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.bootstrap.servers": "c1.example:19091",
        "log.dirs": str(tmp_path / f"n{node_id}"),
    }
    props.update(extra)
    return {k: v for k, v in props.items() if v is not None}


def controller_config(tmp_path, node_id=1, **extra) -> ServerConfig:
    return ServerConfig(controller_props(tmp_path, node_id, **extra))


def write_config(tmp_path, props) -> str:
    path = tmp_path / f"node{props['node.id']}.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return str(path)


def read_bootstrap_checkpoint(path):
    """(kraft_version, VotersRecord) decoded straight from the file's control batches."""
    with open(path, "rb") as f:
        data = f.read()
    types, kraft_version, voters = [], None, None
    for header in iter_batches(data, 0, True):
        assert header.is_control
        for record in decode_records(data, header.position):
            kind = parse_control_type(record.key)
            types.append(kind)
            if kind == CONTROL_KRAFT_VERSION:
                kraft_version = M.DATA["KRaftVersionRecord"].decode(0, Reader(record.value)).kraft_version
            elif kind == CONTROL_VOTERS:
                voters = M.DATA["VotersRecord"].decode(0, Reader(record.value))
    assert types[0] == CONTROL_SNAPSHOT_HEADER and types[-1] == CONTROL_SNAPSHOT_FOOTER
    return kraft_version, voters


# ---- --initial-controllers syntax -------------------------------------------------------------


def test_initial_controllers_kip_syntax():
    voters = quorum.parse_initial_controllers(f"1-{U1}@h1:9093, 2-{U2}@[::1]:9094", "CONTROLLER")
    assert voters.voters == (
        Voter(1, uuid_from_str(U1), (Endpoint("CONTROLLER", "h1", 9093),), 0, 1),
        Voter(2, uuid_from_str(U2), (Endpoint("CONTROLLER", "::1", 9094),), 0, 1),
    )


def test_initial_controllers_kafka_syntax_is_the_same_set():
    kip = quorum.parse_initial_controllers(f"1-{U1}@h1:9093,2-{U2}@h2:9093", "C")
    kafka = quorum.parse_initial_controllers(f"2@h2:9093:{U2},1@h1:9093:{U1}", "C")
    assert kip == kafka


def test_a_uuid_with_dashes_parses():
    voters = quorum.parse_initial_controllers(f"4-{U4}@h4:1", "C")
    assert voters.get(4).directory_id == uuid_from_str(U4)


@pytest.mark.parametrize("text,why", [
    ("1@h1:9093", "bad entry '1@h1:9093': expected id-uuid@host:port"),
    (f"1-{U1}@h1", f"bad entry '1-{U1}@h1': expected"),
    (f"x-{U1}@h1:9093", f"bad entry 'x-{U1}@h1:9093': expected"),
    ("1-AAECAwQFBgcICQoLDA0O@h1:9093", "bad entry '1-AAECAwQFBgcICQoLDA0O@h1:9093': "
                                       "'AAECAwQFBgcICQoLDA0O' is not a directory id"),
    ("1-AAECAwQFBgcICQoLDA0ODx@h:1", "'AAECAwQFBgcICQoLDA0ODx' is not a directory id"),  # not canonical
    ("1-AAAAAAAAAAAAAAAAAAAAAA@h:1", "'AAAAAAAAAAAAAAAAAAAAAA' is a reserved directory id"),
    (f"1-{U1}@h1:70000", "port 70000 out of range"),
    (f"1-{U1}@h1:9093,1-{U2}@h2:9093", f"bad entry '1-{U2}@h2:9093': voter 1 is listed twice"),
    (f"1-{U1}@h1:9093,", "bad entry '': expected"),
    ("", "no entries given"),
])
def test_initial_controllers_errors_name_the_flag_and_the_entry(text, why):
    with pytest.raises(ConfigError) as e:
        quorum.parse_initial_controllers(text, "C")
    assert str(e.value).startswith("--initial-controllers: ")
    assert why in str(e.value)


# ---- the bootstrap plan -----------------------------------------------------------------------


def test_standalone_is_this_node_on_its_advertised_controller_endpoint(tmp_path):
    plan = quorum.plan_bootstrap(controller_config(tmp_path), U1, standalone=True)
    assert (plan.mode, plan.kraft_version, plan.directory_id) == ("standalone", 1, U1)
    me = Voter(1, uuid_from_str(U1), (Endpoint("CONTROLLER", "c1.example", 19091),), 0, 1)
    assert plan.voters.voters == (me,)


def test_standalone_without_advertised_listeners_uses_the_listener_or_localhost(tmp_path):
    config = controller_config(tmp_path, **{"advertised.listeners": None})
    plan = quorum.plan_bootstrap(config, U1, standalone=True)
    assert plan.voters.get(1).endpoints == (Endpoint("CONTROLLER", "localhost", 19091),)
    config = controller_config(tmp_path, **{"advertised.listeners": None,
                                            "listeners": "CONTROLLER://10.0.0.1:9093"})
    assert quorum.plan_bootstrap(config, U1, standalone=True).voters.get(1).endpoints == (
        Endpoint("CONTROLLER", "10.0.0.1", 9093),)


def test_initial_controllers_give_this_node_its_listed_directory_id(tmp_path):
    text = f"1-{U1}@c1:1,2-{U2}@c2:2,3-{U3}@c3:3"
    plan = quorum.plan_bootstrap(controller_config(tmp_path, 2), U4, initial_controllers=text)
    assert (plan.mode, plan.kraft_version, plan.directory_id) == ("initial-controllers", 1, U2)
    assert plan.voters.ids() == {1, 2, 3}


def test_a_controller_not_in_the_initial_controllers_gets_a_new_directory_id(tmp_path):
    plan = quorum.plan_bootstrap(controller_config(tmp_path, 4), U4, initial_controllers=f"1-{U1}@c1:1")
    assert plan.directory_id is None and plan.voters.ids() == {1}


def test_no_flags_with_static_voters_is_a_kraft_version_0_quorum(tmp_path):
    config = controller_config(tmp_path, **{"controller.quorum.voters": "1@c1.example:19091"})
    for kwargs in ({}, {"no_initial_controllers": True}):
        plan = quorum.plan_bootstrap(config, U1, **kwargs)
        assert (plan.mode, plan.kraft_version, plan.voters, plan.directory_id) == ("static", 0, None, None)


def test_no_flags_without_voters_is_an_observer_controller(tmp_path):
    for kwargs in ({}, {"no_initial_controllers": True}):
        plan = quorum.plan_bootstrap(controller_config(tmp_path), U1, **kwargs)
        assert (plan.mode, plan.voters, plan.directory_id) == ("observer", None, None)


def test_standalone_accepts_static_voters_naming_only_this_node(tmp_path):
    config = controller_config(tmp_path, **{"controller.quorum.voters": "1@c1.example:19091"})
    assert quorum.plan_bootstrap(config, U1, standalone=True).voters.ids() == {1}


@pytest.mark.parametrize("kwargs,message", [
    ({"standalone": True, "initial_controllers": f"1-{U1}@c1:1"},
     "--standalone: cannot be used together with --initial-controllers"),
    ({"standalone": True, "no_initial_controllers": True},
     "--no-initial-controllers: cannot be used together with --standalone"),
    ({"initial_controllers": f"1-{U1}@c1:1", "no_initial_controllers": True},
     "--no-initial-controllers: cannot be used together with --initial-controllers"),
])
def test_conflicting_flags(tmp_path, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        quorum.plan_bootstrap(controller_config(tmp_path), U1, **kwargs)


def test_dynamic_flags_must_agree_with_static_voters(tmp_path):
    config = controller_config(tmp_path, **{"controller.quorum.voters": "1@c1:1,2@c2:2"})
    with pytest.raises(ConfigError, match=r"--standalone: controller.quorum.voters names voters \[1, 2\] "
                                          r"but --standalone bootstraps \[1\]"):
        quorum.plan_bootstrap(config, U1, standalone=True)
    with pytest.raises(ConfigError, match="--initial-controllers: controller.quorum.voters"):
        quorum.plan_bootstrap(config, U1, initial_controllers=f"1-{U1}@c1:1")


def test_a_broker_refuses_the_dynamic_flags(tmp_path):
    config = ServerConfig({"process.roles": "broker", "node.id": "5", "listeners": "PLAINTEXT://:9092",
                           "controller.listener.names": "CONTROLLER",
                           "controller.quorum.bootstrap.servers": "c1:1", "log.dirs": str(tmp_path)})
    assert quorum.plan_bootstrap(config, U1).mode == "broker"
    assert quorum.plan_bootstrap(config, U1, no_initial_controllers=True).voters is None
    with pytest.raises(ConfigError, match="--standalone: only for a controller"):
        quorum.plan_bootstrap(config, U1, standalone=True)
    with pytest.raises(ConfigError, match="--initial-controllers: only for a controller"):
        quorum.plan_bootstrap(config, U1, initial_controllers=f"1-{U1}@c1:1")


# ---- format_node: meta.properties and the bootstrap checkpoint ---------------------------------


@pytest.fixture
def recorded_checkpoints(monkeypatch):
    """Record write_bootstrap_checkpoint calls instead of writing, and whether meta.properties
    existed yet (it must not: it is the commit point)."""
    calls = []

    def record(metadata_dir, plan):
        calls.append((metadata_dir, plan, os.path.exists(os.path.join(metadata_dir, "meta.properties"))))
        return ""

    monkeypatch.setattr(node, "write_bootstrap_checkpoint", record)
    return calls


def test_format_standalone_meta_properties(tmp_path, recorded_checkpoints):
    config = controller_config(tmp_path)
    done = node.format_node(config, "cluster-a", standalone=True)
    meta = read_properties(str(tmp_path / "n1" / "meta.properties"))
    assert (meta["cluster.id"], meta["node.id"]) == ("cluster-a", "1")
    assert meta["directory.id"] == done.metadata_directory_id
    [(metadata_dir, plan, meta_existed)] = recorded_checkpoints
    assert metadata_dir == str(tmp_path / "n1") and not meta_existed
    assert plan.voters.get(1).directory_id == uuid_from_str(meta["directory.id"])


def test_format_initial_controllers_meta_properties(tmp_path, recorded_checkpoints):
    text = f"1-{U1}@c1:1,2-{U2}@c2:2,3-{U3}@c3:3"
    for node_id, uuid in ((1, U1), (2, U2), (3, U3)):
        config = controller_config(tmp_path, node_id)
        node.format_node(config, "cluster-a", initial_controllers=text)
        meta = read_properties(str(tmp_path / f"n{node_id}" / "meta.properties"))
        assert meta["directory.id"] == uuid
    assert [plan.voters for _, plan, _ in recorded_checkpoints] == [recorded_checkpoints[0][1].voters] * 3


def test_format_metadata_dir_apart_from_log_dirs(tmp_path, recorded_checkpoints):
    config = controller_config(tmp_path, **{"log.dirs": f"{tmp_path}/a,{tmp_path}/b",
                                            "metadata.log.dir": f"{tmp_path}/meta/"})
    done = node.format_node(config, "cluster-a", initial_controllers=f"1-{U1}@c1:1")
    assert done.directories == [f"{tmp_path}/a", f"{tmp_path}/b", f"{tmp_path}/meta"]
    assert read_properties(f"{tmp_path}/meta/meta.properties")["directory.id"] == U1
    assert read_properties(f"{tmp_path}/a/meta.properties")["directory.id"] != U1
    assert [d for d, _, _ in recorded_checkpoints] == [f"{tmp_path}/meta"]


def test_format_static_and_observer_write_no_checkpoint(tmp_path, recorded_checkpoints):
    node.format_node(controller_config(tmp_path, 1, **{"controller.quorum.voters": "1@c1:1"}), "c")
    node.format_node(controller_config(tmp_path, 2), "c")
    assert recorded_checkpoints == []
    assert os.path.exists(tmp_path / "n2" / "meta.properties")
    assert not os.path.exists(tmp_path / "n2" / quorum.METADATA_PARTITION_DIR)


def test_a_refused_format_writes_nothing(tmp_path, recorded_checkpoints):
    config = controller_config(tmp_path, **{"log.dirs": f"{tmp_path}/a,{tmp_path}/b"})
    node.format_node(ServerConfig(controller_props(tmp_path, **{"log.dirs": f"{tmp_path}/b"})), "c")
    with pytest.raises(LogDirError, match="is already formatted"):
        node.format_node(config, "c", standalone=True)
    assert not os.path.exists(tmp_path / "a" / "meta.properties") and recorded_checkpoints == []


@needs_engine_log
def test_format_standalone_writes_the_bootstrap_checkpoint(tmp_path):
    done = node.format_node(controller_config(tmp_path), "cluster-a", standalone=True)
    path = tmp_path / "n1" / quorum.METADATA_PARTITION_DIR / BOOTSTRAP_CHECKPOINT
    kraft_version, voters = read_bootstrap_checkpoint(path)
    assert kraft_version == 1
    [v] = voters.voters
    assert (v.voter_id, v.voter_directory_id) == (1, uuid_from_str(done.metadata_directory_id))
    assert [(e.name, e.host, e.port) for e in v.endpoints] == [("CONTROLLER", "c1.example", 19091)]
    kv = v.kraft_version_feature
    assert (kv.min_supported_version, kv.max_supported_version) == (0, 1)
    from raft.engine_log import read_snapshot_file

    snapshot = read_snapshot_file(str(path))  # and the raft side reads back the plan's voter set
    assert (snapshot.kraft_version, snapshot.voters, snapshot.values) == (1, done.plan.voters, [])


@needs_engine_log
def test_format_initial_controllers_writes_the_same_checkpoint_on_each(tmp_path):
    text = f"1-{U1}@c1:1,2-{U2}@c2:2,3-{U3}@c3:3"
    decoded = []
    for node_id in (1, 2, 3):
        node.format_node(controller_config(tmp_path, node_id), "cluster-a", initial_controllers=text)
        path = tmp_path / f"n{node_id}" / quorum.METADATA_PARTITION_DIR / BOOTSTRAP_CHECKPOINT
        kraft_version, voters = read_bootstrap_checkpoint(path)
        assert kraft_version == 1
        decoded.append([(v.voter_id, v.voter_directory_id, [(e.name, e.host, e.port) for e in v.endpoints])
                        for v in voters.voters])
    assert decoded[0] == [(1, uuid_from_str(U1), [("CONTROLLER", "c1", 1)]),
                          (2, uuid_from_str(U2), [("CONTROLLER", "c2", 2)]),
                          (3, uuid_from_str(U3), [("CONTROLLER", "c3", 3)])]
    assert decoded[0] == decoded[1] == decoded[2]


# ---- the command line: errors are one line ------------------------------------------------------


@pytest.mark.parametrize("flags,message", [
    (["--initial-controllers", "1@h:1"], "strom: --initial-controllers: bad entry '1@h:1': expected "
                                         "id-uuid@host:port (or id@host:port:uuid)\n"),
    (["--standalone", "--initial-controllers", f"1-{U1}@h:1"],
     "strom: --standalone: cannot be used together with --initial-controllers\n"),
])
def test_format_errors_are_one_line(tmp_path, capsys, flags, message):
    path = write_config(tmp_path, controller_props(tmp_path))
    assert main(["format", "--config", path, *flags]) == 1
    captured = capsys.readouterr()
    assert captured.err == message and captured.out == ""
    assert not os.path.exists(tmp_path / "n1" / "meta.properties")


def test_format_observer_prints_its_directory_id(tmp_path, capsys):
    path = write_config(tmp_path, controller_props(tmp_path))
    assert main(["format", "--config", path, "--cluster-id", "cluster-a"]) == 0
    out = capsys.readouterr().out.splitlines()
    directory_id = read_properties(str(tmp_path / "n1" / "meta.properties"))["directory.id"]
    assert out[0] == f"Formatted {tmp_path}/n1 for cluster cluster-a"
    assert out[1].startswith(f"Metadata log dir {tmp_path}/n1: directory.id {directory_id}; no voters: "
                             "this controller starts as an observer")
    assert main(["format", "--config", path, "--ignore-formatted"]) == 0
    assert capsys.readouterr().out == "All of the log directories are already formatted.\n"


def test_quorum_argument_errors_are_one_line(tmp_path, capsys):
    assert main(["quorum", "--bootstrap-controller", "nohost", "describe", "--status"]) == 1
    assert capsys.readouterr().err == "strom: --bootstrap-controller: expected host:port,..., got 'nohost'\n"
    assert main(["quorum", "--bootstrap-controller", "h:1", "remove-controller",
                 "--controller-id", "3", "--controller-uuid", "nope"]) == 1
    assert capsys.readouterr().err == ("strom: --controller-uuid: 'nope' is not a directory id "
                                       "(22 characters of URL-safe base64)\n")
    assert main(["quorum", "--bootstrap-controller", "h:1", "describe", "--status", "--human-readable"]) == 1
    assert capsys.readouterr().err == "strom: --human-readable: only with describe --replication\n"


def test_remove_controller_dry_run(capsys):
    assert main(["quorum", "--bootstrap-controller", "h:1", "remove-controller", "-i", "3",
                 "--controller-directory-id", U3, "--dry-run"]) == 0
    assert capsys.readouterr().out == f"DRY RUN of removing  KRaft controller 3 with directory id {U3}\n"


# ---- add-controller / remove-controller requests ------------------------------------------------


def round_trip(api_key: int, version: int, body):
    codec = M.REQUESTS[api_key]
    w = Writer()
    codec.write(version, body, w)
    return codec.decode(version, Reader(bytes(w.buf)))


def test_add_controller_reads_the_new_controller(tmp_path, recorded_checkpoints, capsys):
    props = controller_props(tmp_path, 4, listeners="CONTROLLER://:19094,OTHER://:1",
                             **{"advertised.listeners": None, "listener.security.protocol.map":
                                "CONTROLLER:PLAINTEXT,OTHER:PLAINTEXT"})
    path = write_config(tmp_path, props)
    done = node.format_node(ServerConfig(props), "cluster-a")
    controller = quorum.read_new_controller(path)
    assert controller == quorum.NewController(4, uuid_from_str(done.metadata_directory_id),
                                              (Endpoint("CONTROLLER", "localhost", 19094),), "cluster-a")
    body = round_trip(quorum.ADD_RAFT_VOTER, 0, quorum.build_add_raft_voter(
        controller.cluster_id, controller.voter_id, controller.directory_id, controller.endpoints))
    assert (body.cluster_id, body.timeout_ms, body.voter_id, body.voter_directory_id) == (
        "cluster-a", 30000, 4, controller.directory_id)
    assert [(lsn.name, lsn.host, lsn.port) for lsn in body.listeners] == [("CONTROLLER", "localhost", 19094)]
    assert main(["quorum", "--bootstrap-controller", "h:1", "add-controller", "--config", path,
                 "--dry-run"]) == 0
    assert capsys.readouterr().out == (f"DRY RUN of adding controller 4 with directory id "
                                       f"{done.metadata_directory_id} and endpoints: CONTROLLER://localhost:19094\n")


def test_add_controller_needs_a_formatted_controller(tmp_path):
    path = write_config(tmp_path, controller_props(tmp_path, 4))
    with pytest.raises(ConfigError, match="is not formatted: run `strom format` first"):
        quorum.read_new_controller(path)
    broker = {"process.roles": "broker", "node.id": "5", "listeners": "PLAINTEXT://:9092",
              "controller.listener.names": "CONTROLLER", "controller.quorum.bootstrap.servers": "c1:1",
              "log.dirs": str(tmp_path / "b")}
    with pytest.raises(ConfigError, match="process.roles: has no controller"):
        quorum.read_new_controller(write_config(tmp_path, broker))


def test_remove_and_describe_requests():
    body = round_trip(quorum.REMOVE_RAFT_VOTER, 0, quorum.build_remove_raft_voter(3, uuid_from_str(U3)))
    assert (body.cluster_id, body.voter_id, body.voter_directory_id) == (None, 3, uuid_from_str(U3))
    body = round_trip(quorum.DESCRIBE_QUORUM, 2, quorum.build_describe_quorum())
    assert [(t.topic_name, [p.partition_index for p in t.partitions]) for t in body.topics] == [
        ("__cluster_metadata", [0])]


# ---- describe --status / --replication ----------------------------------------------------------

R = M.DescribeQuorumResponse
P = R.TopicData.PartitionData
S = P.ReplicaState


def replica(replica_id, uuid, leo, fetched=-1, caught_up=-1):
    return S(replica_id=replica_id, replica_directory_id=uuid_from_str(uuid) if uuid else bytes(16),
             log_end_offset=leo, last_fetch_timestamp=fetched, last_caught_up_timestamp=caught_up)


def answer(voters, observers, leader_id=2, nodes=None, error=Error.NONE, partition_error=Error.NONE):
    if nodes is None:
        listener = R.Node.Listener
        nodes = [R.Node(node_id=i, listeners=[listener(name="CONTROLLER", host=f"c{i}", port=9090 + i)])
                 for i in (1, 2, 3)]
    partition = P(partition_index=0, error_code=partition_error, leader_id=leader_id, leader_epoch=7,
                  high_watermark=1500, current_voters=voters, observers=observers)
    return R(error_code=error, topics=[R.TopicData(topic_name="__cluster_metadata", partitions=[partition])],
             nodes=nodes)


THREE_VOTERS = answer(
    [replica(1, U1, 1480, 1700000000900, 1700000000100), replica(2, U2, 1510, 1700000001000, 1700000001000),
     replica(3, U3, 1510, 1700000000990, 1700000000990)],
    [replica(4, U4, 1200, 1700000000950, -1), replica(7, None, 1510, 1700000000999, 1700000000999)])


def test_describe_status():
    assert quorum.format_status(THREE_VOTERS, "cluster-a") == (
        "ClusterId:              cluster-a\n"
        "LeaderId:               2\n"
        "LeaderEpoch:            7\n"
        "HighWatermark:          1500\n"
        "MaxFollowerLag:         30\n"
        "MaxFollowerLagTimeMs:   900\n"
        'CurrentVoters:          '
        f'[{{"id": 1, "directoryId": "{U1}", "endpoints": ["CONTROLLER://c1:9091"]}}, '
        f'{{"id": 2, "directoryId": "{U2}", "endpoints": ["CONTROLLER://c2:9092"]}}, '
        f'{{"id": 3, "directoryId": "{U3}", "endpoints": ["CONTROLLER://c3:9093"]}}]\n'
        f'CurrentObservers:       [{{"id": 4, "directoryId": "{U4}"}}, {{"id": 7}}]')


def test_describe_status_of_a_caught_up_single_voter_without_nodes():
    status = quorum.format_status(answer([replica(2, None, 10, 5, 5)], [], nodes=[]), "c")
    assert status.splitlines()[4:] == ["MaxFollowerLag:         0", "MaxFollowerLagTimeMs:   0",
                                       'CurrentVoters:          [{"id": 2}]', "CurrentObservers:       []"]


def test_describe_status_lag_time_unknown_without_caught_up_timestamps():
    status = quorum.format_status(answer([replica(2, U2, 10, 5, 5), replica(3, U3, 4)], []), "c")
    assert status.splitlines()[4:6] == ["MaxFollowerLag:         6", "MaxFollowerLagTimeMs:   -1"]


def test_describe_status_ipv6_endpoint():
    nodes = [R.Node(node_id=2, listeners=[R.Node.Listener(name="CONTROLLER", host="::1", port=9093)])]
    status = quorum.format_status(answer([replica(2, U2, 10)], [], nodes=nodes), "c")
    assert f'[{{"id": 2, "directoryId": "{U2}", "endpoints": ["CONTROLLER://[::1]:9093"]}}]' in status


def test_describe_replication():
    assert quorum.format_replication(THREE_VOTERS).split("\n") == [
        "NodeId\tDirectoryId           \tLogEndOffset\tLag\tLastFetchTimestamp\tLastCaughtUpTimestamp\t"
        "Status  \t",
        f"2     \t{U2}\t1510        \t0  \t1700000001000     \t1700000001000        \tLeader  \t",
        f"1     \t{U1}\t1480        \t30 \t1700000000900     \t1700000000100        \tFollower\t",
        f"3     \t{U3}\t1510        \t0  \t1700000000990     \t1700000000990        \tFollower\t",
        f"4     \t{U4}\t1200        \t310\t1700000000950     \t-1                   \tObserver\t",
        "7     \tAAAAAAAAAAAAAAAAAAAAAA\t1510        \t0  \t1700000000999     \t1700000000999        \t"
        "Observer\t",
    ]


def test_describe_replication_human_readable():
    lines = quorum.format_replication(THREE_VOTERS, now_ms=1700000001500).split("\n")
    assert lines[1].split("\t")[4:6] == ["500 ms ago        ", "500 ms ago           "]
    assert lines[4].split("\t")[4:6] == ["550 ms ago        ", "-1                   "]


@pytest.mark.parametrize("kwargs,message", [
    ({"error": Error.CLUSTER_AUTHORIZATION_FAILED}, "CLUSTER_AUTHORIZATION_FAILED"),
    ({"partition_error": Error.NOT_LEADER_OR_FOLLOWER}, "NOT_LEADER_OR_FOLLOWER"),
    ({"leader_id": 9}, "LEADER_NOT_AVAILABLE: the leader 9 is not among the replicas"),
])
def test_describe_errors(kwargs, message):
    response = answer([replica(2, U2, 10)], [], **kwargs)
    for fmt in (lambda: quorum.format_status(response, "c"), lambda: quorum.format_replication(response)):
        with pytest.raises(quorum.QuorumError, match=message):
            fmt()


# ---- following the leader ----------------------------------------------------------------------


def test_leader_address_needs_the_leaders_endpoint():
    assert quorum.leader_address(THREE_VOTERS) == ("c2", 9092)
    no_leader = answer([replica(2, U2, 10)], [], leader_id=-1, partition_error=Error.NOT_LEADER_OR_FOLLOWER)
    assert quorum.leader_address(no_leader) is None
    unnamed = answer([replica(2, U2, 10)], [], nodes=[], partition_error=Error.NOT_LEADER_OR_FOLLOWER)
    assert quorum.leader_address(unnamed) is None


def test_response_error_reads_the_partition_of_describe_quorum():
    response = answer([replica(2, U2, 10)], [], partition_error=Error.NOT_LEADER_OR_FOLLOWER)
    assert quorum.response_error(quorum.DESCRIBE_QUORUM, response) == Error.NOT_LEADER_OR_FOLLOWER
    assert quorum.response_error(quorum.DESCRIBE_QUORUM, THREE_VOTERS) == Error.NONE
    removed = M.RemoveRaftVoterResponse(error_code=Error.VOTER_NOT_FOUND)
    assert quorum.response_error(quorum.REMOVE_RAFT_VOTER, removed) == Error.VOTER_NOT_FOUND


def test_pick_version():
    served = {55: (0, 1), 80: (0, 1)}
    assert quorum.pick_version(served, 55, 0, 2) == 1
    assert quorum.pick_version(served, 80, 0, 0) == 0
    assert quorum.pick_version(served, 81, 0, 0) is None
    assert quorum.pick_version({55: (2, 3)}, 55, 0, 1) is None


def test_parse_addresses():
    assert quorum.parse_addresses("--bootstrap-controller", "h1:9093, [::1]:9094,:9095") == [
        ("h1", 9093), ("::1", 9094), ("localhost", 9095)]
