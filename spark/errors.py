"""The one exception the Spark reader raises for things a user can fix or must know.

Spark wraps a Python error in its own (an AnalysisException at ``load()``, a
PythonException inside a failed task) and prints the Python message after its own prefix,
so every message here starts with ``strom:`` and says the problem in its first line: what
was wrong, where (the option, path, file and byte position), and what to do about it.
"""
from __future__ import annotations


class StromSparkError(ValueError):
    """A Strom read cannot go on: a bad option, a missing path or topic, lost data, or a
    corrupt segment file."""

    def __init__(self, message: str):
        super().__init__(message if message.startswith("strom:") else f"strom: {message}")
