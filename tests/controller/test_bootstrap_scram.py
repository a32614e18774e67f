"""strom format --add-scram, as kafka-storage format parses it (ScramParser), and the bootstrap
metadata file a new cluster's first active controller commits."""
import base64

import pytest

from controller.bootstrap import FormatError, read_bootstrap_records, scram_record, write_bootstrap_records
from metadata.scram import credential
from metadata.security import SCRAM_SHA_256, SCRAM_SHA_512, ScramCredential


def as_credential(record) -> tuple[str, ScramCredential]:
    return record.name, ScramCredential(record.mechanism, record.salt, record.stored_key, record.server_key,
                                        record.iterations)


def test_add_scram_with_a_password_makes_the_credential_with_a_random_salt_and_4096_iterations():
    record = scram_record("SCRAM-SHA-256=[name=alice,password=alice-secret]", random_bytes=lambda n: b"s" * n)
    assert as_credential(record) == ("alice", credential(SCRAM_SHA_256, "alice-secret", b"s" * 32, 4096))


def test_add_scram_takes_a_base64_salt_iterations_and_quoted_values():
    salt = base64.b64encode(b"NaCl").decode()
    record = scram_record(f'SCRAM-SHA-512=[name="bob",password="ab",iterations=8192,salt="{salt}"]')
    assert as_credential(record) == ("bob", credential(SCRAM_SHA_512, "ab", b"NaCl", 8192))


@pytest.mark.parametrize("argument, message", [
    ("SCRAM-SHA-256", "Failed to find equals sign in SCRAM argument 'SCRAM-SHA-256'"),
    ("SCRAM-SHA-1=[name=a,password=b]", "The add-scram mechanism SCRAM-SHA-1 is not supported."),
    ("SCRAM-SHA-256=name=a,password=b]", "Expected configuration string to start with ["),
    ("SCRAM-SHA-256=[name=a,password=b", "Expected configuration string to end with ]"),
    ("SCRAM-SHA-256=[password=b]", "You must supply 'name' to add-scram"),
    ("SCRAM-SHA-256=[name=a]", "You must supply one of 'password' or 'saltedpassword' to add-scram"),
    ("SCRAM-SHA-256=[name=a,saltedpassword=YWJj]",
     "You must supply 'salt' with 'saltedpassword' to add-scram"),
    ("SCRAM-SHA-256=[name=a,password=b,iterations=4095]",
     "The 'iterations' value must be >= 4096 for add-scram using SCRAM_SHA_256"),
    ("SCRAM-SHA-512=[name=a,password=b,iterations=16385]",
     "The 'iterations' value must be <= 16384 for add-scram using SCRAM_SHA_512"),
    ("SCRAM-SHA-256=[name=a,password=b,colour=red]", "Unknown SCRAM configurations: colour"),
    ("SCRAM-SHA-256=[name=a,password=b,salt=!!]", "Failed to decode given salt: !!"),
])
def test_add_scram_refuses_what_kafka_storage_refuses(argument, message):
    with pytest.raises(FormatError) as e:
        scram_record(argument)
    assert str(e.value) == message


def test_the_bootstrap_file_gives_back_its_records(tmp_path):
    records = [scram_record("SCRAM-SHA-256=[name=alice,password=x]"),
               scram_record("SCRAM-SHA-512=[name=bob,password=y]")]
    write_bootstrap_records(str(tmp_path), records)
    read_back = read_bootstrap_records(str(tmp_path))
    assert [as_credential(r) for r in read_back] == [as_credential(r) for r in records]
    assert read_bootstrap_records(str(tmp_path / "elsewhere")) == []
