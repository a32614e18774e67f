"""AlterClientQuotas at the controller (KIP-546), as Kafka's ClientQuotaControlManager decides
it, and DescribeClientQuotas's filters over the image the records build, as ClientQuotasImage."""
import pytest

from controller.quota_control import QuotaControl
from metadata.image import MetadataImage
from protocol import messages as M
from protocol.errors import Error
from protocol.metadata_records import decode_record, encode_record
from security.quotas import MATCH_DEFAULT, MATCH_EXACT, MATCH_SPECIFIED, describe_client_quotas

A = M.AlterClientQuotasRequest
D = M.DescribeClientQuotasRequest


def op(key, value=0.0, remove=False):
    return A.EntryData.OpData(key=key, value=value, remove=remove)


def entry(entity, *ops):
    return A.EntryData(entity=[A.EntryData.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                       ops=list(ops))


class Quotas:
    def __init__(self):
        self.control = QuotaControl()
        self.image = MetadataImage()
        self.offset = 0
        self.records = []

    def alter(self, *entries, validate_only=False):
        req = A(entries=list(entries), validate_only=validate_only)
        result = self.control.alter_client_quotas(self.image, req)
        self.records = result.records
        for record in result.records:
            self.image.replay(self.offset, decode_record(encode_record(record))[2])
            self.offset += 1
        return [([(e.entity_type, e.entity_name) for e in r.entity], r.error_code, r.error_message)
                for r in result.response.entries]

    def describe(self, *components, strict=False):
        req = D(components=[D.ComponentData(entity_type=t, match_type=m, match=n) for t, m, n in components],
                strict=strict)
        response = describe_client_quotas(self.image.client_quotas, req)
        if response.error_code:
            return response.error_code, response.error_message
        return [([(e.entity_type, e.entity_name) for e in r.entity], {v.key: v.value for v in r.values})
                for r in response.entries]


def test_set_quotas_are_written_as_client_quota_records_and_described():
    q = Quotas()
    assert q.alter(entry([("user", "alice"), ("client-id", "app")], op("producer_byte_rate", 1024)),
                   entry([("client-id", None)], op("consumer_byte_rate", 2048),
                         op("request_percentage", 12.5))) == [
        ([("client-id", "app"), ("user", "alice")], Error.NONE, None),
        ([("client-id", None)], Error.NONE, None)]
    assert [(r.key, r.value, r.remove) for r in q.records] == [
        ("producer_byte_rate", 1024.0, False), ("consumer_byte_rate", 2048.0, False),
        ("request_percentage", 12.5, False)]
    assert q.describe() == [([("client-id", None)],
                             {"consumer_byte_rate": 2048.0, "request_percentage": 12.5}),
                            ([("client-id", "app"), ("user", "alice")], {"producer_byte_rate": 1024.0})]


def test_an_unchanged_value_writes_nothing_and_removing_an_unset_key_writes_nothing():
    q = Quotas()
    q.alter(entry([("user", "alice")], op("producer_byte_rate", 1024)))
    assert q.alter(entry([("user", "alice")], op("producer_byte_rate", 1024),
                         op("consumer_byte_rate", remove=True))) == [([("user", "alice")], Error.NONE, None)]
    assert q.records == []


def test_remove_deletes_the_key_and_the_entity_once_it_has_none():
    q = Quotas()
    q.alter(entry([("user", "alice")], op("producer_byte_rate", 1024), op("consumer_byte_rate", 10)))
    q.alter(entry([("user", "alice")], op("producer_byte_rate", remove=True)))
    assert [(r.key, r.remove) for r in q.records] == [("producer_byte_rate", True)]
    assert q.describe() == [([("user", "alice")], {"consumer_byte_rate": 10.0})]
    q.alter(entry([("user", "alice")], op("consumer_byte_rate", remove=True)))
    assert q.image.client_quotas == {}


def test_validate_only_answers_the_same_and_writes_nothing():
    q = Quotas()
    assert q.alter(entry([("user", "bob")], op("producer_byte_rate", 5)),
                   entry([("user", "bob2")], op("producer_byte_rate", -5)), validate_only=True) == [
        ([("user", "bob")], Error.NONE, None),
        ([("user", "bob2")], Error.INVALID_REQUEST, "Quota producer_byte_rate must be greater than 0")]
    assert q.records == [] and q.image.client_quotas == {}


@pytest.mark.parametrize("entity, ops, message", [
    ([], [op("producer_byte_rate", 1)], "Invalid empty client quota entity"),
    ([("group", "g")], [op("producer_byte_rate", 1)], "Unhandled client quota entity type: group"),
    ([("user", "")], [op("producer_byte_rate", 1)], "Empty user not supported"),
    ([("ip", "10.0.0.1"), ("user", "a")], [op("connection_creation_rate", 1)],
     "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
    ([("ip", "not an address")], [op("connection_creation_rate", 1)],
     "not an address is not a valid IP or resolvable host."),
    ([("user", "a")], [op("connection_creation_rate", 1)],
     "Invalid configuration key connection_creation_rate"),
    ([("ip", "10.0.0.1")], [op("producer_byte_rate", 1)], "Invalid configuration key producer_byte_rate"),
    ([("user", "a")], [op("unknown_key", 1)], "Invalid configuration key unknown_key"),
    ([("user", "a")], [op("consumer_byte_rate", 0)], "Quota consumer_byte_rate must be greater than 0"),
    ([("user", "a")], [op("producer_byte_rate", 10.5)], "producer_byte_rate cannot be a fractional value."),
    ([("user", "a")], [op("producer_byte_rate", 2.0**64)],
     "Proposed value for producer_byte_rate is too large for a LONG."),
    ([("ip", None)], [op("connection_creation_rate", 2.0**32)],
     "Proposed value for connection_creation_rate is too large for an INT."),
])
def test_an_invalid_entity_or_value_fails_that_entity_with_invalid_request(entity, ops, message):
    q = Quotas()
    results = q.alter(entry(entity, *ops), entry([("user", "ok")], op("producer_byte_rate", 7)))
    assert results[0][1:] == (Error.INVALID_REQUEST, message)
    assert results[1][1] == Error.NONE
    assert q.image.client_quotas == {(("user", "ok"),): {"producer_byte_rate": 7.0}}


def test_an_entity_failing_on_a_later_key_writes_none_of_its_keys():
    q = Quotas()
    q.alter(entry([("user", "a")], op("producer_byte_rate", 5), op("consumer_byte_rate", -1)))
    assert q.records == [] and q.image.client_quotas == {}


def test_fractional_request_percentage_and_ip_quotas_are_accepted():
    q = Quotas()
    results = q.alter(entry([("user", None), ("client-id", None)], op("request_percentage", 0.5)),
                      entry([("ip", "::1")], op("connection_creation_rate", 3)),
                      entry([("ip", None)], op("connection_creation_rate", 30)))
    assert [r[1] for r in results] == [Error.NONE] * 3


def test_a_key_named_twice_or_an_entity_named_twice_is_refused_as_a_duplicate_entity():
    q = Quotas()
    results = q.alter(entry([("user", "a")], op("producer_byte_rate", 5), op("producer_byte_rate", 6)))
    assert results == [([("user", "a")], Error.INVALID_REQUEST,
                        "Ignoring duplicate entity ClientQuotaEntity(entries={user=a})")]
    assert q.records == []
    results = q.alter(entry([("user", "b")], op("producer_byte_rate", 5)),
                      entry([("user", "b")], op("consumer_byte_rate", 6)))
    assert results == [([("user", "b")], Error.INVALID_REQUEST,
                        "Ignoring duplicate entity ClientQuotaEntity(entries={user=b})")]
    # As Kafka's: the first entry's records stay written.
    assert q.image.client_quotas == {(("user", "b"),): {"producer_byte_rate": 5.0}}


@pytest.fixture
def described():
    q = Quotas()
    q.alter(entry([("user", "alice")], op("producer_byte_rate", 1)),
            entry([("user", None)], op("producer_byte_rate", 2)),
            entry([("user", "alice"), ("client-id", "app")], op("producer_byte_rate", 3)),
            entry([("user", "alice"), ("client-id", None)], op("producer_byte_rate", 4)),
            entry([("client-id", "app")], op("producer_byte_rate", 5)),
            entry([("ip", "10.0.0.1")], op("connection_creation_rate", 6)))
    return q


def values(result):
    return sorted(int(v["producer_byte_rate"] if "producer_byte_rate" in v else v["connection_creation_rate"])
                  for _, v in result)


def test_describe_matches_exact_default_and_specified_components(described):
    assert values(described.describe(("user", MATCH_EXACT, "alice"))) == [1, 3, 4]
    assert values(described.describe(("user", MATCH_EXACT, "alice"), strict=True)) == [1]
    assert values(described.describe(("user", MATCH_DEFAULT, None))) == [2]
    assert values(described.describe(("user", MATCH_SPECIFIED, None))) == [1, 2, 3, 4]
    assert values(described.describe(("user", MATCH_SPECIFIED, None), strict=True)) == [1, 2]
    assert values(described.describe(("user", MATCH_EXACT, "alice"),
                                     ("client-id", MATCH_DEFAULT, None))) == [4]
    assert values(described.describe(("client-id", MATCH_EXACT, "app"), strict=True)) == [5]
    assert values(described.describe(("ip", MATCH_SPECIFIED, None))) == [6]
    assert values(described.describe()) == [1, 2, 3, 4, 5, 6]
    assert described.describe(strict=True) == []


@pytest.mark.parametrize("components, code, message", [
    ([("", MATCH_EXACT, "a")], Error.INVALID_REQUEST, "Invalid empty entity type."),
    ([("user", MATCH_EXACT, "a"), ("user", MATCH_DEFAULT, None)], Error.INVALID_REQUEST,
     "Entity type user cannot appear more than once in the filter."),
    ([("group", MATCH_EXACT, "a")], Error.UNSUPPORTED_VERSION, "Unsupported entity type group"),
    ([("user", MATCH_EXACT, None)], Error.INVALID_REQUEST,
     "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    ([("user", MATCH_DEFAULT, "a")], Error.INVALID_REQUEST,
     "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
    ([("user", MATCH_SPECIFIED, "a")], Error.INVALID_REQUEST,
     "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
    ([("user", 7, None)], Error.INVALID_REQUEST, "Unknown match type 7"),
    ([("ip", MATCH_SPECIFIED, None), ("client-id", MATCH_DEFAULT, None)], Error.INVALID_REQUEST,
     "Invalid entity filter component combination. IP filter component should not be used with user or "
     "clientId filter component."),
])
def test_describe_refuses_a_bad_filter_as_kafka(described, components, code, message):
    assert described.describe(*components) == (code, message)
