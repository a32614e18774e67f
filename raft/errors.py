"""Errors the KRaft core raises to its driver."""


class RaftInvariantError(RuntimeError):
    """A rule that must never break broke (Kafka throws and halts the process)."""


class NotLeaderError(RuntimeError):
    """A client write reached a replica that is not the leader."""
