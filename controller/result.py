"""What a controller manager hands back: the records to commit and the answer to give.

The managers (cluster_control, replication_control, topic_control) are pure: they read the
MetadataImage and the request, and return a ControllerResult. The shell appends
``records`` to the metadata log as one batch, waits until it is committed and replayed,
and only then sends ``response``, so an answer never describes a state that could still be
lost with a failover.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ControllerResult:
    records: list[Any] = field(default_factory=list)
    response: Any = None
