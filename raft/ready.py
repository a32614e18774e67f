"""What one step of the core hands back to its driver, to carry out in field order."""
from __future__ import annotations

from dataclasses import dataclass, field

from .log import OffsetAndEpoch
from .messages import Message
from .quorum_state import ElectionState


@dataclass(frozen=True, slots=True)
class Append:
    base_offset: int
    last_offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class Truncate:
    offset: int


@dataclass
class Ready:
    persist: ElectionState | None = None  # write the quorum-state file first
    log_ops: list[Append | Truncate] = field(default_factory=list)  # already applied; flush them
    messages: list[tuple[int, Message]] = field(default_factory=list)  # then send
    high_watermark: int | None = None  # set when it advanced in this step: entries below are committed
    # The listener must reload its state from this snapshot (handleSnapshot) before reading
    # committed entries from its end offset on.
    snapshot_loaded: OffsetAndEpoch | None = None
    appended_offset: int | None = None  # RaftCore.append: the offset of the first value
    leader_changed: bool = False  # (leader id, epoch) changed in this step: handleLeaderChange
