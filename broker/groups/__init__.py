"""Consumer groups: the classic group protocol and offsets in ``__consumer_offsets``.

    storage.py      the __consumer_offsets record formats, partitioning, replay
    group.py        ClassicGroup and Member: states and single-group rules
    coordinator.py  the pure state machine (JoinGroup ... DeleteGroups, timers)
    runtime.py      the asyncio shell: loading, appends, topic creation, timers
"""
