"""The metadata image's security state: ACLs, SCRAM credentials and client quotas replayed
from their records, and kept by a snapshot (MetadataImage.records())."""
import uuid

from metadata.image import MetadataImage, quota_entity
from metadata.security import (
    ALLOW,
    DENY,
    GROUP,
    LITERAL,
    PREFIXED,
    READ,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    TOPIC,
    WRITE,
    AclEntry,
    ScramCredential,
)
from protocol import messages as M
from protocol.metadata_records import decode_record, encode_record

A, B = uuid.UUID(int=1), uuid.UUID(int=2)


def replayed(records, image=None) -> MetadataImage:
    image = image or MetadataImage()
    for offset, record in enumerate(records):
        image.replay(offset, decode_record(encode_record(record))[2])
    return image


def acl_record(acl_id, resource_type=TOPIC, name="orders", pattern=LITERAL, principal="User:alice",
               host="*", operation=READ, permission=ALLOW):
    return M.AccessControlEntryRecord(id=acl_id.bytes, resource_type=resource_type, resource_name=name,
                                      pattern_type=pattern, principal=principal, host=host,
                                      operation=operation, permission_type=permission)


def scram_record(user, mechanism=SCRAM_SHA_256, iterations=4096):
    return M.UserScramCredentialRecord(name=user, mechanism=mechanism, salt=b"salt-" + user.encode(),
                                       stored_key=b"stored", server_key=b"server", iterations=iterations)


def quota_record(entity, key, value, remove=False):
    E = M.ClientQuotaRecord.EntityData
    return M.ClientQuotaRecord(entity=[E(entity_type=t, entity_name=n) for t, n in entity], key=key,
                               value=value, remove=remove)


def test_access_control_entry_record_adds_the_acl_under_its_id_and_the_remove_record_drops_it():
    image = replayed([acl_record(A),
                      acl_record(B, GROUP, "app-", PREFIXED, "User:bob", "10.0.0.1", WRITE, DENY)])
    assert image.acls == {
        A: AclEntry(A, TOPIC, "orders", LITERAL, "User:alice", "*", READ, ALLOW),
        B: AclEntry(B, GROUP, "app-", PREFIXED, "User:bob", "10.0.0.1", WRITE, DENY),
    }
    replayed([M.RemoveAccessControlEntryRecord(id=A.bytes)], image)
    assert list(image.acls) == [B]


def test_user_scram_credential_record_replaces_the_users_credential_for_its_mechanism():
    image = replayed([scram_record("alice"), scram_record("alice", SCRAM_SHA_512),
                      scram_record("alice", SCRAM_SHA_256, iterations=8192)])
    assert image.scram_credentials == {"alice": {
        SCRAM_SHA_256: ScramCredential(SCRAM_SHA_256, b"salt-alice", b"stored", b"server", 8192),
        SCRAM_SHA_512: ScramCredential(SCRAM_SHA_512, b"salt-alice", b"stored", b"server", 4096)}}


def test_removing_a_users_last_scram_credential_forgets_the_user():
    image = replayed([scram_record("alice"), scram_record("alice", SCRAM_SHA_512),
                      M.RemoveUserScramCredentialRecord(name="alice", mechanism=SCRAM_SHA_256)])
    assert set(image.scram_credentials["alice"]) == {SCRAM_SHA_512}
    replayed([M.RemoveUserScramCredentialRecord(name="alice", mechanism=SCRAM_SHA_512)], image)
    assert image.scram_credentials == {}


def test_client_quota_record_sets_and_removes_a_key_of_its_entity():
    user_client = [("user", "alice"), ("client-id", "app")]
    image = replayed([quota_record(user_client, "producer_byte_rate", 1024.0),
                      quota_record([("user", None)], "consumer_byte_rate", 2048.0),
                      quota_record(user_client, "request_percentage", 50.0)])
    entity = quota_entity(user_client)
    assert entity == (("client-id", "app"), ("user", "alice"))  # the same entity in any order
    assert image.client_quotas == {entity: {"producer_byte_rate": 1024.0, "request_percentage": 50.0},
                                   (("user", None),): {"consumer_byte_rate": 2048.0}}
    replayed([quota_record(list(reversed(user_client)), "producer_byte_rate", 0.0, remove=True),
              quota_record(user_client, "request_percentage", 0.0, remove=True)], image)
    assert image.client_quotas == {(("user", None),): {"consumer_byte_rate": 2048.0}}


def test_a_snapshot_of_the_image_keeps_acls_scram_credentials_and_quotas():
    image = replayed([
        acl_record(A), acl_record(B, GROUP, "app-", PREFIXED, "User:bob", "*", READ, DENY),
        scram_record("alice"), scram_record("bob", SCRAM_SHA_512, 16384),
        quota_record([("user", "alice"), ("client-id", None)], "producer_byte_rate", 1e6),
        quota_record([("client-id", "app")], "consumer_byte_rate", 5e5),
    ])
    restored = replayed(image.records())
    assert restored.acls == image.acls
    assert restored.scram_credentials == image.scram_credentials
    assert restored.client_quotas == image.client_quotas
