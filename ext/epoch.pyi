"""Leader-epoch cache: leader epoch -> start offset of that epoch, for one partition log.

Persisted as Kafka's ``leader-epoch-checkpoint`` text file:

    0                 version
    2                 number of entries
    0 0               "epoch startOffset", epochs and offsets strictly increasing
    3 150

written to ``<path>.tmp``, fsynced, renamed over ``path`` (and the directory fsynced).

Invariant: epochs and start offsets both strictly increase.
"""
UNDEFINED_EPOCH: int  # -1
UNDEFINED_EPOCH_OFFSET: int  # -1

class LeaderEpochCache:
    path: str | None
    def __init__(self, path: str | None = None) -> None:
        """Loads ``path`` if it exists (malformed file -> ValueError naming it); None keeps
        the cache in memory only."""
    def entries(self) -> list[tuple[int, int]]: ...
    def __len__(self) -> int: ...
    @property
    def latest_epoch(self) -> int: ...  # UNDEFINED_EPOCH when empty
    @property
    def earliest_entry(self) -> tuple[int, int] | None: ...
    @property
    def latest_entry(self) -> tuple[int, int] | None: ...
    def assign(self, epoch: int, start_offset: int, flush: bool = True) -> None:
        """Record that ``epoch`` starts at ``start_offset``. Ignored for a negative epoch or if
        it is already the latest entry with that start (or an earlier one). Entries that
        would break monotonicity (epoch >= new epoch, or start offset >= new start offset)
        are removed first."""
    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch semantics: (largest epoch <= requested, its exclusive end
        offset = start of the next epoch, or log_end_offset for the latest epoch).
        requested == UNDEFINED_EPOCH or > every known epoch -> (UNDEFINED_EPOCH,
        UNDEFINED_EPOCH_OFFSET); requested < every known epoch -> (requested, start offset of
        the earliest epoch)."""
    def epoch_for_offset(self, offset: int) -> int:
        """The epoch whose range holds ``offset`` (UNDEFINED_EPOCH if before the first)."""
    def previous_epoch(self, epoch: int) -> int: ...  # largest epoch < epoch, or UNDEFINED_EPOCH
    def truncate_from_end(self, end_offset: int, flush: bool = True) -> None:
        """Drop entries whose start offset >= end_offset (log truncated to end_offset)."""
    def truncate_from_start(self, start_offset: int, flush: bool = True) -> None:
        """Log start moved to start_offset: drop entries that end at or before it and move
        the earliest remaining entry's start up to start_offset."""
    def clear(self, flush: bool = True) -> None: ...
    def flush(self) -> None: ...
