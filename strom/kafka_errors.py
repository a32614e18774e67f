"""The text Kafka's tools print for an error code: what ``ExecutionException.getMessage()`` gives
for the exception Kafka's admin client raises (``<exception class>: <Errors' default message>``),
for the errors the admin commands print per partition."""
from __future__ import annotations

from protocol.errors import Error

_PACKAGE = "org.apache.kafka.common.errors."
# Errors' exception class and default message (clients' org.apache.kafka.common.protocol.Errors).
_EXCEPTIONS: dict[int, tuple[str, str]] = {
    Error.UNKNOWN_SERVER_ERROR: ("UnknownServerException",
                                 "The server experienced an unexpected error when processing the request."),
    Error.OFFSET_OUT_OF_RANGE: ("OffsetOutOfRangeException",
                                "The requested offset is not within the range of offsets maintained by "
                                "the server."),
    Error.UNKNOWN_TOPIC_OR_PARTITION: ("UnknownTopicOrPartitionException",
                                       "This server does not host this topic-partition."),
    Error.LEADER_NOT_AVAILABLE: ("LeaderNotAvailableException",
                                 "There is no leader for this topic-partition as we are in the middle of a "
                                 "leadership election."),
    Error.NOT_LEADER_OR_FOLLOWER: ("NotLeaderOrFollowerException",
                                   "For requests intended only for the leader, this error indicates that the "
                                   "broker is not the current leader. For requests intended for any replica, "
                                   "this error indicates that the broker is not a replica of the topic "
                                   "partition."),
    Error.REQUEST_TIMED_OUT: ("TimeoutException", "The request timed out."),
    Error.INVALID_TOPIC_EXCEPTION: ("InvalidTopicException",
                                    "The request attempted to perform an operation on an invalid topic."),
    Error.TOPIC_AUTHORIZATION_FAILED: ("TopicAuthorizationException", "Topic authorization failed."),
    Error.POLICY_VIOLATION: ("PolicyViolationException",
                             "Request parameters do not satisfy the configured policy."),
    Error.KAFKA_STORAGE_ERROR: ("KafkaStorageException",
                                "Disk error when trying to access log file on the disk."),
    Error.BROKER_NOT_AVAILABLE: ("BrokerNotAvailableException", "The broker is not available."),
    Error.COORDINATOR_LOAD_IN_PROGRESS: ("CoordinatorLoadInProgressException",
                                         "The coordinator is loading and hence can't process requests."),
    Error.COORDINATOR_NOT_AVAILABLE: ("CoordinatorNotAvailableException",
                                      "The coordinator is not available."),
    Error.NOT_COORDINATOR: ("NotCoordinatorException", "This is not the correct coordinator."),
    Error.CLUSTER_AUTHORIZATION_FAILED: ("ClusterAuthorizationException", "Cluster authorization failed."),
    Error.SECURITY_DISABLED: ("SecurityDisabledException", "Security features are disabled."),
    Error.INVALID_TXN_STATE: ("InvalidTxnStateException",
                              "The producer attempted a transactional operation in an invalid state."),
    Error.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: ("TransactionalIdAuthorizationException",
                                                  "Transactional Id authorization failed."),
    Error.TRANSACTIONAL_ID_NOT_FOUND: ("TransactionalIdNotFoundException",
                                       "The transactionalId could not be found."),
    Error.INVALID_REPLICA_ASSIGNMENT: ("InvalidReplicaAssignmentException", "Replica assignment is invalid."),
    Error.LOG_DIR_NOT_FOUND: ("LogDirNotFoundException",
                              "The user-specified log directory is not found in the broker config."),
    Error.PREFERRED_LEADER_NOT_AVAILABLE: ("PreferredLeaderNotAvailableException",
                                           "The preferred leader was not available."),
    Error.ELIGIBLE_LEADERS_NOT_AVAILABLE: ("EligibleLeadersNotAvailableException",
                                           "Eligible topic partition leaders are not available."),
    Error.ELECTION_NOT_NEEDED: ("ElectionNotNeededException",
                                "Leader election not needed for topic partition."),
    Error.NO_REASSIGNMENT_IN_PROGRESS: ("NoReassignmentInProgressException",
                                        "No partition reassignment is in progress."),
}


def exception_text(code: int, message: str | None = None) -> str:
    """``org.apache.kafka.common.errors.OffsetOutOfRangeException: The requested offset is ...``; the
    broker's own message, when it sent one, in place of the default; an error without a known
    exception as its name."""
    known = _EXCEPTIONS.get(code)
    if known is None:
        try:
            return f"{Error(code).name}{': ' + message if message else ''}"
        except ValueError:
            return f"error code {code}{': ' + message if message else ''}"
    cls, default = known
    return f"{_PACKAGE}{cls}: {message or default}"


def exception_message(code: int, message: str | None = None) -> str:
    """The exception's own message (``Throwable.getMessage()`` of the cause): the broker's message,
    else Errors' default, else the code's name."""
    if message:
        return message
    known = _EXCEPTIONS.get(code)
    if known is not None:
        return known[1]
    try:
        return Error(code).name
    except ValueError:
        return f"error code {code}"


def exception_class(code: int) -> str:
    """The exception's class name (``getClass().getName()``), as kafka-log-dirs prints a log dir's
    error; the code's name for an error without a known exception here."""
    known = _EXCEPTIONS.get(code)
    if known is not None:
        return _PACKAGE + known[0]
    try:
        return Error(code).name
    except ValueError:
        return f"error code {code}"
