"""ElectLeaders (key 43) as Kafka's ElectLeadersRequest/Response.json lay it out, pinned to bytes
derived by hand: v0 has no election type, v1 adds it and the top-level error, v2 is flexible."""
from protocol import messages as M
from protocol.types import Reader, Writer


def encode(codec, version, body) -> str:
    w = Writer()
    codec.write(version, body, w)
    return bytes(w.buf).hex()


def test_elect_leaders_request_bytes_for_every_version():
    R = M.ElectLeadersRequest
    req = R(election_type=1, topic_partitions=[R.TopicPartitions(topic="t", partitions=[0, 2])],
            timeout_ms=1000)
    codec = M.REQUESTS[43]
    body = "00000001" "0001" "74" "00000002" "00000000" "00000002" "000003e8"
    assert encode(codec, 0, req) == body
    assert encode(codec, 1, req) == "01" + body
    assert encode(codec, 2, req) == "01" "02" "0274" "03" "00000000" "00000002" "00" "000003e8" "00"
    assert codec.decode(2, Reader(bytes.fromhex(encode(codec, 2, req)))) == req


def test_elect_leaders_request_with_null_partitions_means_every_partition():
    codec = M.REQUESTS[43]
    req = M.ElectLeadersRequest(election_type=0, topic_partitions=None, timeout_ms=1000)
    assert encode(codec, 1, req) == "00" "ffffffff" "000003e8"
    assert encode(codec, 2, req) == "00" "00" "000003e8" "00"
    assert codec.decode(2, Reader(bytes.fromhex("0000000003e800"))).topic_partitions is None


def test_elect_leaders_response_bytes_v0_and_v2():
    R = M.ElectLeadersResponse
    P = R.ReplicaElectionResult.PartitionResult
    response = R(throttle_time_ms=0, error_code=0, replica_election_results=[R.ReplicaElectionResult(
        topic="t", partition_result=[P(partition_id=0, error_code=84, error_message=None)])])
    codec = M.RESPONSES[43]
    assert encode(codec, 0, response) == "00000000" "00000001" "000174" "00000001" "00000000" "0054" "ffff"
    assert encode(codec, 2, response) == ("00000000" "0000" "02" "0274" "02" "00000000" "0054" "00"
                                          "00" "00" "00")
