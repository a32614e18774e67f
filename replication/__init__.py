"""Partition replication: ISR, high watermark, leader epochs, truncation, acks=all.

The core (pure: no IO, clock or randomness; stepped with time and messages) is

| module        | what                                                                       |
|---------------|----------------------------------------------------------------------------|
| log.py        | the storage seam a partition sees (PartitionLog); MemoryPartitionLog      |
| isr.py        | PartitionRegistration, LeaderAndIsr; committed and pending ISR states      |
| replica.py    | ReplicaState and Replica: the leader's view of one follower                |
| partition.py  | Partition: roles, follower fetch state, ISR changes, HW, acks=all checks   |
| follower.py   | the follower's side: initial fetch state, truncation, applying fetched data |

The edge (asyncio, sockets, files) wires it to the broker: ReplicaManager, replica fetchers,
the acks=all purgatory, the AlterPartition manager, HW checkpoints and ISR expiration.
"""
