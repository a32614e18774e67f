"""Consumer groups: the classic protocol, the KIP-848 consumer protocol, and offsets, all
kept in ``__consumer_offsets``.

    storage.py      the __consumer_offsets record formats, partitioning, replay
    group.py        ClassicGroup and Member: states and single-group rules
    coordinator.py  the pure state machine: partitions, offsets, Describe/List/DeleteGroups,
                    timers; steps the two protocols below
    classic.py      the classic protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, rebalances
    consumer_group.py  KIP-848 groups: ConsumerGroupHeartbeat reconciliation, assignors
    retention.py    which committed offsets have expired (offsets.retention.minutes)
    runtime.py      the asyncio shell: loading, appends, topic creation, timers
"""
