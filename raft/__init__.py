"""KRaft: Kafka's Raft for the ``__cluster_metadata-0`` log (KIP-595, KIP-996; KIP-630/853 to come).

The pure core (``quorum_state``, ``core``, ``messages``, ``log``) imports no asyncio, socket, os,
time or random; the driver that does IO lives at the edge.
"""
