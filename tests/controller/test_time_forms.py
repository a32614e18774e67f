"""The coarser forms of the time properties (log.retention.minutes, log.retention.hours,
log.roll.hours) are dynamic broker configs as in Kafka (DynamicLogConfig takes every synonym of
a topic config), each an INT with Kafka's bound."""
from metadata.configs import BROKER_RESOURCE
from protocol import messages as M
from protocol.errors import Error
from tests.controller.scenario import Scenario

R = M.IncrementalAlterConfigsRequest
SET = 0


def alter(s: Scenario, name: str, prop: str, value: str):
    res = R.AlterConfigsResource(resource_type=BROKER_RESOURCE, resource_name=name, configs=[
        R.AlterConfigsResource.AlterableConfig(name=prop, config_operation=SET, value=value)])
    response = s.apply(s.topics.incremental_alter_configs(s.image, R(resources=[res], validate_only=False)))
    return [(r.error_code, r.error_message) for r in response.responses]


def test_the_hours_and_minutes_forms_are_dynamic_broker_configs():
    s = Scenario(brokers=1)
    assert alter(s, "", "log.retention.hours", "24") == [(Error.NONE, None)]
    assert alter(s, "", "log.retention.minutes", "90") == [(Error.NONE, None)]
    assert alter(s, "1", "log.roll.hours", "2") == [(Error.NONE, None)]
    assert s.image.configs[(BROKER_RESOURCE, "")] == {"log.retention.hours": "24",
                                                      "log.retention.minutes": "90"}
    assert s.image.configs[(BROKER_RESOURCE, "1")] == {"log.roll.hours": "2"}


def test_a_bad_hours_value_is_invalid_config_with_kafkas_message():
    s = Scenario(brokers=1)
    assert alter(s, "", "log.roll.hours", "0") == [
        (Error.INVALID_CONFIG, "Invalid value 0 for configuration log.roll.hours: Value must be at least 1")]
    assert alter(s, "", "log.retention.hours", "a day") == [
        (Error.INVALID_CONFIG, "Invalid value a day for configuration log.retention.hours: "
                               "Not a number of type INT")]


def test_log_roll_jitter_hours_is_a_dynamic_broker_config_of_at_least_zero():
    s = Scenario(brokers=1)
    assert alter(s, "", "log.roll.jitter.hours", "0") == [(Error.NONE, None)]
    assert s.image.configs[(BROKER_RESOURCE, "")] == {"log.roll.jitter.hours": "0"}
    assert alter(s, "1", "log.roll.jitter.hours", "-1") == [
        (Error.INVALID_CONFIG, "Invalid value -1 for configuration log.roll.jitter.hours: "
                               "Value must be at least 0")]
