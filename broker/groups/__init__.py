"""Consumer groups: the classic protocol, the KIP-848 consumer protocol, and offsets, all
kept in ``__consumer_offsets``.

    storage.py      the __consumer_offsets record formats, partitioning, replay
    group.py        ClassicGroup and Member: states and single-group rules
    coordinator.py  the pure state machine (JoinGroup ... DeleteGroups, timers)
    consumer_group.py  KIP-848 groups: ConsumerGroupHeartbeat reconciliation, assignors
    runtime.py      the asyncio shell: loading, appends, topic creation, timers
"""
