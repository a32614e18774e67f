"""protocol.net.freeze_startup_heap, which a broker and a controller call once started: the
garbage of startup is collected first, and what is alive then leaves the full collections."""
from __future__ import annotations

import gc
import weakref

from protocol.net import freeze_startup_heap


class _Node:
    pass


def test_startup_garbage_is_collected_and_the_live_heap_leaves_the_collections():
    cycle = _Node()
    cycle.self = cycle  # garbage only the cyclic collector can free
    dead = weakref.ref(cycle)
    del cycle
    kept = [_Node() for _ in range(1000)]
    try:
        freeze_startup_heap()
        assert dead() is None, "a cycle left from startup must not be frozen for good"
        assert gc.get_freeze_count() >= len(kept)
        tracked = {id(o) for o in gc.get_objects()}
        assert not any(id(o) in tracked for o in kept), "the live heap is out of the collections"
        later = _Node()
        later.self = later
        gone = weakref.ref(later)
        del later
        gc.collect()
        assert gone() is None, "what is allocated afterwards is collected as before"
    finally:
        gc.unfreeze()
