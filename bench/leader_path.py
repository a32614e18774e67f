"""The leader's acks=all path in one process, over real loopback sockets: what each produce
costs the leader, measured where the box's noise does not reach it.

    python -m bench.leader_path [--produces N]      # µs of wall clock and CPU per produce
    PY=$(python -c 'import sys; print(sys.executable)')  # the interpreter, not a pyenv shim
    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        $PY -m bench.leader_path --produces 400     # (and 100): instructions per produce

The leader is the broker's own code, wired as a broker wires it: a protocol.net Server and the
Dispatcher serving the produce and fetch handlers over a ReplicaManager on real logs
(tests/broker/replica_nodes.py's Node). Three clients connect to it over loopback:

* a producer sending acks=-1 Produce v9 requests of 2 records, one at a time, each after the
  answer to the one before;
* two followers (brokers 2 and 3) sending Fetch v17 with replica_state from the leader's log
  end, as Kafka's replica fetcher does, so each produce wakes two waiting fetches and is
  committed by the next two.

On a shared VM, wall-clock and /proc figures move by ±25 % between identical runs (steal,
halted vCPUs). The instructions an interpreter executes do not: the difference of callgrind's
``Collected`` total between a 400- and a 100-produce run, divided by 300, gives the
instructions per acks=all produce (leader and clients together; the clients' share is the same
before and after a change to the leader). It was 1.69 M before the work of 2026-11-27 on this
path (f851649) and 1.34 M after it.
"""
from __future__ import annotations

import argparse
import asyncio
import struct
import tempfile
import time
from pathlib import Path

from protocol import messages as M
from protocol.dispatch import Dispatcher
from protocol.headers import decode_response, encode_request, read_response_header
from protocol.net import Server
from protocol.types import Reader
from tests.broker.replica_nodes import TOPIC, TOPIC_ID, Cluster, Node, records

WARM_UP = 100  # produces before the measured ones
FOLLOWERS = (2, 3)
FETCH_WAIT_MS = 500  # replica.fetch.wait.max.ms


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return await reader.readexactly(size)


def _answered_offset(frame: bytes) -> tuple[int, int]:
    """(error code, base offset) of a Produce v9 answer to one partition."""
    r = Reader(frame)
    read_response_header(r, 0, 9)
    partition = decode_response(0, 9, r).responses[0].partition_responses[0]
    return partition.error_code, partition.base_offset


async def run(produces: int, directory: str | None = None) -> dict:
    """``WARM_UP`` then ``produces`` acks=all produces through the leader; their answers (error
    code, base offset), wall-clock and CPU seconds of the measured ones."""
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        cluster = Cluster()
        cluster.create_topic(configs={"min.insync.replicas": "2"})
        leader = Node(Path(tmp), 1, cluster)
        # As the broker wires it: a new high watermark alone wakes consumers, not followers.
        leader.replicas.on_committed = lambda topic, p: leader.waiters.notify((topic, p), replicas=False)
        dispatcher = Dispatcher(list(leader.apis.values()))
        server = Server(dispatcher.handle, 100 << 20)
        port = server.bind("127.0.0.1", 0)
        server.start()
        stopping = False

        async def follower(replica_id: int) -> None:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                while not stopping:
                    end = leader.log().log_end_offset
                    fetch = leader.fetch_request(end, replica_id=replica_id,
                                                 last_fetched_epoch=0 if end else -1,
                                                 current_leader_epoch=0, max_wait_ms=FETCH_WAIT_MS)
                    writer.write(encode_request(1, 17, 7, f"broker-{replica_id}", fetch))
                    await _read_frame(reader)
            finally:
                writer.close()

        followers = [asyncio.ensure_future(follower(r)) for r in FOLLOWERS]
        R = M.ProduceRequest
        request = R(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[R.TopicProduceData(
            name=TOPIC, topic_id=TOPIC_ID, partition_data=[
                R.PartitionProduceData(index=0, records=memoryview(records(2)))])])
        frame = encode_request(0, 9, 1, "producer", request)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        answers = []

        async def produce(n: int) -> None:
            for _ in range(n):
                writer.write(frame)
                answers.append(_answered_offset(await _read_frame(reader)))

        try:
            await produce(WARM_UP)
            wall, cpu = time.perf_counter(), time.process_time()
            await produce(produces)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        finally:
            stopping = True
            writer.close()
            await asyncio.wait(followers, timeout=2 * FETCH_WAIT_MS / 1000)
            for task in followers:
                task.cancel()
            await server.close()
            leader.logs.shutdown()
        return {"answers": answers[WARM_UP:], "wall_s": wall, "cpu_s": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--produces", type=int, default=2000)
    args = parser.parse_args()
    result = asyncio.run(run(args.produces))
    n = args.produces
    print(f"{result['wall_s'] / n * 1e6:.1f} µs wall, {result['cpu_s'] / n * 1e6:.1f} µs CPU per acks=all "
          f"produce ({n} produces, 2 records each, 2 followers)")


if __name__ == "__main__":
    main()
