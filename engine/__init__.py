"""Strom's storage engine: partitions on disk in Apache Kafka's log format.

    reader      read-only access to a partition directory (the seam Spark uses)
    checkpoint  Kafka's text checkpoint files, meta.properties, partition.metadata
    config      per-log configuration with Kafka's property names and defaults
    segment     LogSegment: a .log file with its .index and .timeindex
    log         Log: one partition directory (append, read, roll, truncate, retention)
    recovery    loading a partition directory and recovering it after an unclean shutdown
    manager     LogManager: log.dirs, partition directories, root checkpoints

engine/ builds on ext/ and imports nothing from the packages above it.
"""
