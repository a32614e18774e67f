"""SCRAM credentials (RFC 5802, KIP-84) as the metadata log keeps them, and what the image tells
of them (KIP-554's DescribeUserScramCredentials).

From a password, a salt and an iteration count (Kafka's ScramFormatter):

    salted password = Hi(password, salt, iterations)      (PBKDF2 with the mechanism's HMAC)
    client key      = HMAC(salted password, "Client Key")  (not stored)
    stored key      = H(client key)
    server key      = HMAC(salted password, "Server Key")

with SHA-256 or SHA-512 as the mechanism says. A UserScramCredentialRecord holds the salt, the
stored key, the server key and the iterations; never the password.

DescribeUserScramCredentials answers each user named (every user with a credential when none
is named) with the mechanisms and iteration counts of its credentials, never the keys; a user
named twice: DUPLICATE_RESOURCE; a user without a credential: RESOURCE_NOT_FOUND (Kafka's
ScramImage.describe).
"""
from __future__ import annotations

import hashlib
import hmac
from typing import Any

from metadata.image import MetadataImage
from metadata.security import SCRAM_SHA_256, SCRAM_SHA_512, ScramCredential
from protocol import messages as M
from protocol.errors import Error

MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384  # Kafka's, for both mechanisms
DEFAULT_ITERATIONS = 4096  # kafka-storage's and kafka-configs' default
HASHES = {SCRAM_SHA_256: hashlib.sha256, SCRAM_SHA_512: hashlib.sha512}
DESCRIBE_DUPLICATE_USER = "Cannot describe SCRAM credentials for the same user twice in a single request: "
DESCRIBE_USER_THAT_DOES_NOT_EXIST = "Attempt to describe a user credential that does not exist: "


def stored_and_server_key(mechanism: int, salted_password: bytes) -> tuple[bytes, bytes]:
    """The stored key and the server key of a salted password (Kafka's ScramFormatter)."""
    digest = HASHES[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", digest).digest()
    return digest(client_key).digest(), hmac.new(salted_password, b"Server Key", digest).digest()


def salted_password(mechanism: int, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, iterations): PBKDF2 with the mechanism's HMAC (RFC 5802)."""
    return hashlib.pbkdf2_hmac(HASHES[mechanism]().name, password.encode(), salt, iterations)


def credential(mechanism: int, password: str, salt: bytes, iterations: int) -> ScramCredential:
    """The credential a password makes with this salt and iteration count."""
    stored_key, server_key = stored_and_server_key(mechanism, salted_password(mechanism, password, salt,
                                                                              iterations))
    return ScramCredential(mechanism, salt, stored_key, server_key, iterations)


def describe_user_scram_credentials(image: MetadataImage, req) -> Any:
    """Kafka's ScramImage.describe (see the module doc); the broker answers it from its image."""
    R = M.DescribeUserScramCredentialsResponse
    duplicated: dict[str, bool] = {}
    if not req.users:
        duplicated = dict.fromkeys(sorted(image.scram_credentials), False)
    else:
        for user in req.users:
            duplicated[user.name] = user.name in duplicated
    results = []
    for name, twice in duplicated.items():
        result = R.DescribeUserScramCredentialsResult(user=name, error_code=Error.NONE, error_message=None)
        credentials = image.scram_credentials.get(name)
        if twice:
            result.error_code, result.error_message = Error.DUPLICATE_RESOURCE, DESCRIBE_DUPLICATE_USER + name
        elif not credentials:
            result.error_code = Error.RESOURCE_NOT_FOUND
            result.error_message = DESCRIBE_USER_THAT_DOES_NOT_EXIST + name
        else:
            result.credential_infos = [R.DescribeUserScramCredentialsResult.CredentialInfo(
                mechanism=m, iterations=c.iterations) for m, c in sorted(credentials.items())]
        results.append(result)
    return R(error_code=Error.NONE, error_message=None, results=results)
