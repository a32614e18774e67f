"""SCRAM credentials: AlterUserScramCredentials and DescribeUserScramCredentials (KIP-554), as
Kafka's ScramControlManager and ScramImage decide them.

AlterUserScramCredentials. The client sends, per user and mechanism, the salt, the iteration
count and the salted password (Hi(password, salt, i), RFC 5802), never the password; the
controller derives the stored key and the server key from it as Kafka's ScramFormatter does
(metadata.scram) and writes a UserScramCredentialRecord. Each user is decided
on its own, with one error for all its changes:

| case                                                          | error                      |
|---------------------------------------------------------------|----------------------------|
| the user named more than once among deletions and upsertions  | DUPLICATE_RESOURCE         |
| an empty user name                                            | UNACCEPTABLE_CREDENTIAL    |
| a mechanism other than SCRAM-SHA-256 (1) or SCRAM-SHA-512 (2) | UNSUPPORTED_SASL_MECHANISM |
| iterations below 4096 or above 16384                          | UNACCEPTABLE_CREDENTIAL    |
| deleting a credential the user does not have                  | RESOURCE_NOT_FOUND         |

Results come deletions first, then upsertions, then the users refused.

DescribeUserScramCredentials is answered from the image (metadata.scram), by brokers and
controllers alike.
"""
from __future__ import annotations

from typing import Any

from controller.result import ControllerResult
from metadata.image import MetadataImage
from metadata.scram import MAX_ITERATIONS, MIN_ITERATIONS, stored_and_server_key
from metadata.security import SCRAM_MECHANISMS
from protocol import messages as M
from protocol.errors import Error

TWICE = "A user credential cannot be altered twice in the same request"


def _user_and_mechanism_error(name: str, mechanism: int) -> tuple[int, str] | None:
    if not name:
        return Error.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in SCRAM_MECHANISMS:
        return Error.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


class ScramControl:
    def alter_user_scram_credentials(self, image: MetadataImage, req) -> ControllerResult:
        R = M.AlterUserScramCredentialsResponse
        deletions: dict[str, Any] = {}
        upsertions: dict[str, Any] = {}
        errors: dict[str, tuple[int, str]] = {}
        for d in req.deletions:
            if d.name in errors:
                continue
            if deletions.pop(d.name, None) is not None:
                errors[d.name] = (Error.DUPLICATE_RESOURCE, TWICE)
                continue
            error = _user_and_mechanism_error(d.name, d.mechanism)
            if error is None and d.mechanism not in image.scram_credentials.get(d.name, {}):
                error = (Error.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
            if error is not None:
                errors[d.name] = error
            else:
                deletions[d.name] = d
        for u in req.upsertions:
            if u.name in errors:
                continue
            if deletions.pop(u.name, None) is not None or upsertions.pop(u.name, None) is not None:
                errors[u.name] = (Error.DUPLICATE_RESOURCE, TWICE)
                continue
            error = _user_and_mechanism_error(u.name, u.mechanism)
            if error is None and u.iterations < MIN_ITERATIONS:
                error = (Error.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
            elif error is None and u.iterations > MAX_ITERATIONS:
                error = (Error.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
            if error is not None:
                errors[u.name] = error
            else:
                upsertions[u.name] = u
        Result = R.AlterUserScramCredentialsResult
        results: list[Any] = []
        records: list[Any] = []
        for d in deletions.values():
            results.append(Result(user=d.name, error_code=Error.NONE, error_message=None))
            records.append(M.RemoveUserScramCredentialRecord(name=d.name, mechanism=d.mechanism))
        for u in upsertions.values():
            stored_key, server_key = stored_and_server_key(u.mechanism, bytes(u.salted_password))
            records.append(M.UserScramCredentialRecord(name=u.name, mechanism=u.mechanism, salt=bytes(u.salt),
                                                       stored_key=stored_key, server_key=server_key,
                                                       iterations=u.iterations))
            results.append(Result(user=u.name, error_code=Error.NONE, error_message=None))
        for user, (code, message) in errors.items():
            results.append(Result(user=user, error_code=code, error_message=message))
        return ControllerResult(records, R(results=results))
