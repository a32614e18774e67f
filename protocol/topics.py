"""Topic name rules (Kafka's Topic.validate)."""
from __future__ import annotations

import re

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_LENGTH = 249


def topic_name_error(name: str) -> str | None:
    if not name or name in (".", ".."):
        return "topic name is empty or '.'/'..'"
    if len(name) > MAX_TOPIC_LENGTH:
        return f"topic name is longer than {MAX_TOPIC_LENGTH} characters"
    if not _LEGAL_TOPIC.match(name):
        return "topic name may contain only ASCII letters, digits, '.', '_' and '-'"
    return None
