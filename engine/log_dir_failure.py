"""Log dir failure: one path from a failed disk operation to an offline log dir.

Theory of operation (Kafka's LogDirFailureChannel and maybeHandleIOException). Every local
storage operation made while serving (an append as leader or follower, a roll, an index
entry, a flush, a truncation, a segment deletion, the leader-epoch checkpoint, the offset
checkpoints) runs inside ``guard(log_dir, what)``. An OSError there (ENOSPC, EIO, EDQUOT...)

1. marks ``log_dir`` offline, once: the first failure of a dir calls ``on_offline(log_dir,
   message)`` (the broker: partitions of the dir answer KAFKA_STORAGE_ERROR, their fetchers
   stop, and with no log dir left online it halts); with no handler the channel logs the
   message itself. Later failures of an offline dir are not reported again;
2. raises ``KafkaStorageError`` instead, which callers answer as KAFKA_STORAGE_ERROR (56)
   for the partitions they touched.

``message`` is one line naming the directory, what was being done and the OS error, e.g.
``log dir /data/kafka failed while appending to orders-3: [Errno 28] No space left on
device``; no traceback is logged for it anywhere.

The channel is owned by whoever owns the log dirs (the broker gives one to its LogManager,
which gives it to every Log; a Log made without one gets a private channel that only logs).
Nothing here is retried: a dir that failed stays offline until the process restarts, when
recovery truncates whatever a failed write left torn.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from engine.errors import StorageError

log = logging.getLogger("strom.storage")

F = TypeVar("F", bound=Callable[..., Any])


class KafkaStorageError(StorageError):
    """A log dir failed under an operation; its partitions answer KAFKA_STORAGE_ERROR."""

    def __init__(self, log_dir: str, what: str, cause: OSError):
        super().__init__(f"log dir {log_dir} failed while {what}: {cause}")
        self.log_dir = log_dir
        self.what = what
        self.errno = cause.errno


def log_dir_of(partition_dir: str) -> str:
    """The log dir holding a partition directory."""
    return os.path.dirname(os.path.abspath(partition_dir))


class LogDirFailureChannel:
    """The log dirs that failed, and who to tell when one does."""

    def __init__(self, on_offline: Callable[[str, str], None] | None = None):
        self.on_offline = on_offline
        self.offline: dict[str, str] = {}  # log dir -> the message of its first failure

    def is_offline(self, log_dir: str) -> bool:
        return log_dir in self.offline

    def maybe_add_offline_log_dir(self, log_dir: str, what: str, error: OSError) -> KafkaStorageError:
        """Mark ``log_dir`` offline (reported once) and return the error to raise."""
        failure = KafkaStorageError(log_dir, what, error)
        if log_dir not in self.offline:
            self.offline[log_dir] = str(failure)
            if self.on_offline is not None:
                self.on_offline(log_dir, str(failure))
            else:
                log.error("%s", failure)
        return failure

    @contextlib.contextmanager
    def guard(self, log_dir: str, what: str) -> Iterator[None]:
        """Run a storage operation of ``log_dir``: an OSError becomes KafkaStorageError."""
        try:
            yield
        except OSError as e:
            raise self.maybe_add_offline_log_dir(log_dir, what, e) from e


def storage_operation(what: str) -> Callable[[F], F]:
    """Decorate a Log method: an OSError inside it takes the Log's dir offline through its
    ``failure_channel`` (``what`` names the operation; the partition is added)."""
    def decorate(method: F) -> F:
        @functools.wraps(method)
        def wrapper(self, *args, **kwargs):
            try:
                return method(self, *args, **kwargs)
            except OSError as e:
                raise self.failure_channel.maybe_add_offline_log_dir(
                    self.parent_dir, f"{what} {os.path.basename(self.dir)}", e) from e
        return wrapper  # type: ignore[return-value]
    return decorate


__all__ = ["KafkaStorageError", "LogDirFailureChannel", "log_dir_of", "storage_operation"]
