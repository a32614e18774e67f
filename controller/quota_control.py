"""Client quotas: AlterClientQuotas (KIP-546), as Kafka's ClientQuotaControlManager decides it.

Theory of operation. The request is read as Kafka's AlterClientQuotasRequest.entries() reads
it: each entry's entity becomes a map of entity type to name (a type named twice keeps its
last name; a null name is that type's default) and each op a key with a value, or none for a
removal. Entries are then taken in order, each on its own, and answered once per distinct
entity:

- a key named twice in one entry, or an entity that an earlier entry already named:
  INVALID_REQUEST "Ignoring duplicate entity ..." for that entity (records an earlier entry
  for the same entity produced stay written, as Kafka's);
- the entity: empty ("Invalid empty client quota entity"), a type other than ``user``,
  ``client-id`` or ``ip`` ("Unhandled client quota entity type: T"), an empty name ("Empty T
  not supported"), ``ip`` together with another type, an ip name that is not an address;
- each value set: the key must be one of the entity's (user and client-id entities:
  producer_byte_rate and consumer_byte_rate, LONG; request_percentage and
  controller_mutation_rate, DOUBLE; ip entities: connection_creation_rate, INT), else
  "Invalid configuration key K"; greater than 0 ("Quota K must be greater than 0"); an
  integral key's value no larger than its type holds and not fractional.

An entity that fails writes nothing; one that passes writes a ClientQuotaRecord per key whose
value changes (a removal only where the key is set). ``validate_only`` answers the same and
writes nothing. More than MAX_RECORDS_PER_USER_OP records fail the whole request
(POLICY_VIOLATION), as Kafka's bounded record list.

Kafka resolves an ip entity's host name; this pure core accepts address literals only.
"""
from __future__ import annotations

import ipaddress
import math
from typing import Any

from controller.acl_control import MAX_RECORDS_PER_USER_OP, TOO_LARGE
from controller.result import ControllerResult
from metadata.image import MetadataImage, quota_entity
from protocol import messages as M
from protocol.errors import Error

USER, CLIENT_ID, IP = "user", "client-id", "ip"
LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
SHORT_MAX = 2**15 - 1

# Kafka's QuotaConfig: the keys each kind of entity takes, with their ConfigDef types.
USER_AND_CLIENT_KEYS = {
    "producer_byte_rate": "LONG",
    "consumer_byte_rate": "LONG",
    "request_percentage": "DOUBLE",
    "controller_mutation_rate": "DOUBLE",
}
IP_KEYS = {"connection_creation_rate": "INT"}
_INTEGRAL_MAX = {"SHORT": (SHORT_MAX, "a SHORT"), "INT": (INT_MAX, "an INT"), "LONG": (LONG_MAX, "a LONG")}


class _Invalid(Exception):
    pass


def entity_text(entity: dict[str, str | None]) -> str:
    """An entity as Kafka's ClientQuotaEntity.toString writes it."""
    inner = ", ".join(f"{kind}={name}" for kind, name in entity.items())
    return f"ClientQuotaEntity(entries={{{inner}}})"


def _check_entity(entity: dict[str, str | None]) -> dict[str, str]:
    """The entity's quota keys and their types; raises _Invalid (ClientQuotaControlManager's
    validateEntity and configKeysForEntityType)."""
    if not entity:
        raise _Invalid("Invalid empty client quota entity")
    for kind, name in entity.items():
        if kind not in (USER, CLIENT_ID, IP):
            raise _Invalid(f"Unhandled client quota entity type: {kind}")
        if name is not None and name == "":
            raise _Invalid(f"Empty {kind} not supported")
    if IP in entity:
        if USER in entity or CLIENT_ID in entity:
            raise _Invalid("Invalid quota entity combination, IP entity shouldnot be combined with User or "
                           "ClientId")
        ip = entity[IP]
        if ip is not None:
            try:
                ipaddress.ip_address(ip)
            except ValueError:
                raise _Invalid(f"{ip} is not a valid IP or resolvable host.") from None
        return IP_KEYS
    return USER_AND_CLIENT_KEYS


def _check_value(keys: dict[str, str], key: str, value: float) -> None:
    """ClientQuotaControlManager.validateQuotaKeyValue."""
    kind = keys.get(key)
    if kind is None:
        raise _Invalid(f"Invalid configuration key {key}")
    if not value > 0.0:
        raise _Invalid(f"Quota {key} must be greater than 0")
    if kind == "DOUBLE":
        return
    most, name = _INTEGRAL_MAX[kind]
    if value > most:
        raise _Invalid(f"Proposed value for {key} is too large for {name}.")
    if math.fmod(abs(value), 1.0) > 1e-6:
        raise _Invalid(f"{key} cannot be a fractional value.")


def _record_entity(entity: dict[str, str | None]) -> list[Any]:
    return [M.ClientQuotaRecord.EntityData(entity_type=kind, entity_name=name)
            for kind, name in quota_entity(entity.items())]


class QuotaControl:
    def alter_client_quotas(self, image: MetadataImage, req) -> ControllerResult:
        R = M.AlterClientQuotasResponse
        results: dict[tuple, tuple[dict[str, str | None], int, str | None]] = {}
        records: list[Any] = []
        for entry in req.entries:
            entity: dict[str, str | None] = {}
            for e in entry.entity:
                entity.pop(e.entity_type, None)  # a map: the last name given for a type stays
                entity[e.entity_type] = e.entity_name
            key = quota_entity(entity.items())
            ops: dict[str, float | None] = {}
            duplicate_key = False
            for op in entry.ops:
                if op.key in ops:
                    duplicate_key = True
                else:
                    ops[op.key] = None if op.remove else op.value
            if duplicate_key or key in results:
                message = f"Ignoring duplicate entity {entity_text(entity)}"
                results[key] = (entity, Error.INVALID_REQUEST, message)
                continue
            try:
                records += self._alter_entity(image, entity, ops)
            except _Invalid as e:
                results[key] = (entity, Error.INVALID_REQUEST, str(e))
                continue
            results[key] = (entity, Error.NONE, None)
        if len(records) > MAX_RECORDS_PER_USER_OP:
            return ControllerResult([], alter_client_quotas_error(req, Error.POLICY_VIOLATION, TOO_LARGE))
        response = R(entries=[
            R.EntryData(error_code=code, error_message=message,
                        entity=[R.EntryData.EntityData(entity_type=kind, entity_name=name)
                                for kind, name in quota_entity(entity.items())])
            for entity, code, message in results.values()])
        return ControllerResult([] if req.validate_only else records, response)

    @staticmethod
    def _alter_entity(image: MetadataImage, entity: dict[str, str | None],
                      ops: dict[str, float | None]) -> list[Any]:
        keys = _check_entity(entity)
        current = image.client_quotas.get(quota_entity(entity.items()), {})
        out = []
        for key, value in ops.items():
            if value is None:
                if key in current:
                    out.append(M.ClientQuotaRecord(entity=_record_entity(entity), key=key, value=0.0,
                                                   remove=True))
                continue
            _check_value(keys, key, value)
            if current.get(key) != value:
                out.append(M.ClientQuotaRecord(entity=_record_entity(entity), key=key, value=value,
                                               remove=False))
        return out


def alter_client_quotas_error(req, code: int, message: str | None = None) -> Any:
    """Kafka's AlterClientQuotasRequest.getErrorResponse: every entry asked, with ``code``."""
    R = M.AlterClientQuotasResponse
    return R(entries=[
        R.EntryData(error_code=code, error_message=message,
                    entity=[R.EntryData.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                            for e in entry.entity])
        for entry in req.entries])
