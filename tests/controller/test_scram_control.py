"""SCRAM credentials at the controller (KIP-554), as Kafka's ScramControlManager and ScramImage
decide them: the keys derived from the client's salted password, the errors per user, and
Describe from the image."""
import base64
import hashlib
import hmac

import pytest

from controller.scram_control import ScramControl
from metadata.image import MetadataImage
from metadata.scram import credential, describe_user_scram_credentials, salted_password, stored_and_server_key
from metadata.security import SCRAM_SHA_256, SCRAM_SHA_512
from protocol import messages as M
from protocol.errors import Error
from protocol.metadata_records import decode_record, encode_record

A = M.AlterUserScramCredentialsRequest
D = M.DescribeUserScramCredentialsRequest


class Scram:
    def __init__(self):
        self.control = ScramControl()
        self.image = MetadataImage()
        self.offset = 0
        self.last_records = []

    def alter(self, deletions=(), upsertions=()):
        result = self.control.alter_user_scram_credentials(
            self.image, A(deletions=list(deletions), upsertions=list(upsertions)))
        self.last_records = result.records
        for record in result.records:
            self.image.replay(self.offset, decode_record(encode_record(record))[2])
            self.offset += 1
        return [(r.user, r.error_code, r.error_message) for r in result.response.results]

    def describe(self, *users, null=False):
        req = D(users=None if null else [D.UserName(name=u) for u in users])
        response = describe_user_scram_credentials(self.image, req)
        assert response.error_code == Error.NONE
        return [(r.user, r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
                for r in response.results]


def upsert(name, mechanism=SCRAM_SHA_256, password="secret", salt=b"salty", iterations=4096):
    return A.ScramCredentialUpsertion(name=name, mechanism=mechanism, iterations=iterations, salt=salt,
                                      salted_password=salted_password(mechanism, password, salt, iterations))


def delete(name, mechanism=SCRAM_SHA_256):
    return A.ScramCredentialDeletion(name=name, mechanism=mechanism)


def test_the_stored_and_server_keys_verify_rfc_7677s_exchange():
    """RFC 7677's SCRAM-SHA-256 example (user "user", password "pencil"): the client proof it
    shows recovers a client key whose hash is the stored key, and the server signature it shows
    is the server key's HMAC of the exchange."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    salted = salted_password(SCRAM_SHA_256, "pencil", salt, 4096)
    stored_key, server_key = stored_and_server_key(SCRAM_SHA_256, salted)
    nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    auth_message = (f"n=user,r=rOprNGfwEbeRWgbNEkqO,r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,"
                    f"c=biws,r={nonce}").encode()
    proof = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    signature = hmac.new(stored_key, auth_message, hashlib.sha256).digest()
    client_key = bytes(p ^ s for p, s in zip(proof, signature, strict=True))
    assert hashlib.sha256(client_key).digest() == stored_key
    assert base64.b64encode(hmac.new(server_key, auth_message, hashlib.sha256).digest()) == \
        b"6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_an_upsertion_stores_salt_iterations_and_derived_keys_never_the_salted_password():
    s = Scram()
    up = upsert("alice", SCRAM_SHA_512, "alice-secret", b"NaCl", 8192)
    assert s.alter(upsertions=[up]) == [("alice", Error.NONE, None)]
    stored = s.image.scram_credentials["alice"][SCRAM_SHA_512]
    assert stored == credential(SCRAM_SHA_512, "alice-secret", b"NaCl", 8192)
    assert up.salted_password not in (stored.stored_key, stored.server_key)
    assert s.describe("alice") == [("alice", Error.NONE, [(SCRAM_SHA_512, 8192)])]


def test_a_deletion_removes_the_users_credential_for_that_mechanism():
    s = Scram()
    s.alter(upsertions=[upsert("alice"), upsert("bob")])
    s.alter(upsertions=[upsert("alice", SCRAM_SHA_512)])
    assert s.alter(deletions=[delete("alice")]) == [("alice", Error.NONE, None)]
    assert s.describe(null=True) == [("alice", Error.NONE, [(SCRAM_SHA_512, 4096)]),
                                     ("bob", Error.NONE, [(SCRAM_SHA_256, 4096)])]


@pytest.mark.parametrize("upsertion, code, message", [
    (upsert("alice", iterations=4095), Error.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
    (upsert("alice", iterations=16385), Error.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
    (A.ScramCredentialUpsertion(name="alice", mechanism=3, iterations=4096, salt=b"s", salted_password=b"p"),
     Error.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
    (upsert(""), Error.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
])
def test_an_unacceptable_upsertion_fails_its_user_only(upsertion, code, message):
    s = Scram()
    assert s.alter(upsertions=[upsert("bob"), upsertion]) == [("bob", Error.NONE, None),
                                                              (upsertion.name, code, message)]
    assert list(s.image.scram_credentials) == ["bob"]


def test_iterations_at_the_bounds_are_accepted():
    s = Scram()
    assert s.alter(upsertions=[upsert("a", iterations=4096), upsert("b", iterations=16384)]) == [
        ("a", Error.NONE, None), ("b", Error.NONE, None)]


def test_a_user_altered_twice_in_one_request_is_duplicate_resource_and_nothing_of_it_is_written():
    s = Scram()
    s.alter(upsertions=[upsert("alice")])
    twice = "A user credential cannot be altered twice in the same request"
    upsertions = [upsert("alice", SCRAM_SHA_512), upsert("bob")]
    assert s.alter(deletions=[delete("alice")], upsertions=upsertions) == [
        ("bob", Error.NONE, None), ("alice", Error.DUPLICATE_RESOURCE, twice)]
    assert s.alter(upsertions=[upsert("carol"), upsert("carol", SCRAM_SHA_512)]) == [
        ("carol", Error.DUPLICATE_RESOURCE, twice)]
    assert s.last_records == []
    assert set(s.image.scram_credentials) == {"alice", "bob"}
    assert set(s.image.scram_credentials["alice"]) == {SCRAM_SHA_256}


def test_deleting_a_credential_that_does_not_exist_is_resource_not_found():
    s = Scram()
    s.alter(upsertions=[upsert("alice")])
    assert s.alter(deletions=[delete("alice", SCRAM_SHA_512), delete("nobody")]) == [
        ("alice", Error.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        ("nobody", Error.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")]


def test_describe_an_unknown_user_is_resource_not_found_and_a_user_named_twice_duplicate_resource():
    s = Scram()
    s.alter(upsertions=[upsert("alice")])
    assert s.describe("alice", "nobody", "alice") == [("alice", Error.DUPLICATE_RESOURCE, []),
                                                      ("nobody", Error.RESOURCE_NOT_FOUND, [])]
    assert s.describe() == [("alice", Error.NONE, [(SCRAM_SHA_256, 4096)])]  # none named: every user
