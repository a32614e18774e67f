"""Moving a replica between a broker's log dirs: the pure decisions (Kafka's
ReplicaAlterLogDirsThread over a "-future" log).

A move copies the current log into a future log in the target dir, follows the current log
until the future's end is its end, and then the future replaces it. Each step looks at both
logs' offsets and says what to do next:

- COPY from the future's end (the current has more);
- TRUNCATE the future to an offset (the current was truncated under it, or diverged: the end
  of the future's latest epoch in the current log is below the future's end);
- RESTART the future empty at the current's log start (the current's start passed the future's
  end: retention or DeleteRecords removed what the future still needed);
- SWAP: the future holds exactly what the current does.

The copy's bytes per second are bound by replica.alter.log.dirs.io.max.bytes.per.second
(``copy_delay_ms``).
"""
from __future__ import annotations

from typing import NamedTuple

COPY = "copy"
TRUNCATE = "truncate"
RESTART = "restart"
SWAP = "swap"


class MoveStep(NamedTuple):
    kind: str
    offset: int


def next_step(current_start: int, current_end: int, future_end: int,
              diverged_at: int | None = None) -> MoveStep:
    """The next step of a move. ``diverged_at``: where the future's latest epoch ends in the
    current log, when the current was truncated since the last step (None: it was not)."""
    if future_end < current_start:
        return MoveStep(RESTART, current_start)
    if diverged_at is not None and diverged_at < future_end:
        return MoveStep(TRUNCATE, max(diverged_at, current_start))
    if future_end > current_end:
        return MoveStep(TRUNCATE, current_end)
    if future_end == current_end:
        return MoveStep(SWAP, current_end)
    return MoveStep(COPY, future_end)


def copy_delay_ms(rate: float | None, copied_bytes: int, elapsed_ms: float) -> float:
    """How long the copy waits before its next read so that ``copied_bytes`` since the move
    began, ``elapsed_ms`` ago, stay within ``rate`` bytes per second (None: no bound)."""
    if rate is None:
        return 0.0
    if rate <= 0:
        return 1000.0  # a zero rate copies nothing: look again in a second
    return max(0.0, copied_bytes * 1000.0 / rate - elapsed_ms)
