"""ListOffsets' special values (Kafka's ListOffsetsRequest): timestamps that name a position
rather than a time, and the replica ids a request may come from."""

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
CONSUMER_REPLICA_ID = -1  # a client: sees up to the high watermark, from the leader only
DEBUGGING_REPLICA_ID = -2  # a tool (or the controller's balanced recovery): any replica answers
