"""`strom configs`' command line as kafka-configs' ConfigCommandOptions.checkArgs reads it: one
of --bootstrap-server and --bootstrap-controller, broker-loggers named by an integer node id,
ips by an address, Kafka's messages for each refusal."""
import argparse

import pytest

from strom import configs


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    configs.add_parser(parser.add_subparsers())
    return parser.parse_args(["configs", *argv])


def refusal(*argv: str) -> str:
    with pytest.raises(configs.UsageError) as e:
        configs.check_args(parse(*argv))
    return str(e.value)


def test_exactly_one_of_bootstrap_server_and_bootstrap_controller():
    assert refusal("--entity-type", "topics", "--describe") == (
        "One of the required --bootstrap-server or --bootstrap-controller arguments must be specified")
    assert refusal("--bootstrap-server", "h:1", "--bootstrap-controller", "h:2", "--entity-type", "topics",
                   "--describe") == ("Only one of --bootstrap-server and --bootstrap-controller can be "
                                     "specified")
    args = parse("--bootstrap-controller", "h:2", "--entity-type", "broker-loggers", "--entity-name", "1",
                 "--describe")
    assert configs.check_args(args) == (["broker-loggers"], ["1"])


def test_broker_loggers_need_an_integer_node_id():
    assert refusal("--bootstrap-server", "h:1", "--entity-type", "broker-loggers", "--describe") == (
        "An entity name must be specified with --describe of broker-loggers")
    assert refusal("--bootstrap-server", "h:1", "--entity-type", "broker-loggers", "--entity-name", "b1",
                   "--describe") == (
        "The entity name for broker-loggers must be a valid integer broker id, but it is: b1")


def test_an_ip_entity_is_an_address_and_ips_have_a_default():
    assert configs.check_args(parse("--bootstrap-server", "h:1", "--entity-type", "ips", "--entity-default",
                                    "--describe")) == (["ips"], [""])
    assert configs.check_args(parse("--bootstrap-server", "h:1", "--entity-type", "ips", "--entity-name",
                                    "::1", "--alter", "--add-config", "connection_creation_rate=5")) == (
        ["ips"], ["::1"])
    assert refusal("--bootstrap-server", "h:1", "--entity-type", "ips", "--entity-name", "300.1.2.3.4..",
                   "--describe") == (
        "The entity name for ips must be a valid IP or resolvable host, but it is: 300.1.2.3.4..")


def test_the_entity_types_are_kafkas_with_a_bootstrap_argument():
    assert refusal("--bootstrap-server", "h:1", "--entity-type", "client-metrics", "--describe") == (
        "Invalid entity type client-metrics, the entity type must be one of topics, clients, users, brokers, "
        "ips, broker-loggers, groups with a --bootstrap-server or --bootstrap-controller argument")
