"""What each real client shows when a secured listener refuses it (a certificate the broker does
not trust, SASL credentials or a token it refuses), each over a ``Security`` (clients/security.py).
Each one tries to produce once and returns the client's own report of the refusal, for the test
to compare with the error that library is known to show."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess

from . import kafkajs, kcat
from .security import Security, aiokafka_config, confluent_config, kafka_python_config

CLIENT_TIMEOUT_S = 25.0


def confluent(bootstrap: str, security: Security, topic: str) -> list:
    """The errors a confluent-kafka producer reports (its error_cb's KafkaErrors); it delivers
    nothing (asserted)."""
    from confluent_kafka import Producer

    errors: list = []
    delivered: list[bool] = []
    producer = Producer({**confluent_config(security), "bootstrap.servers": bootstrap,
                         "error_cb": errors.append, "message.timeout.ms": 3000})
    producer.produce(topic, b"refused", b"k", on_delivery=lambda err, msg: delivered.append(err is None))
    producer.flush(8)
    assert delivered == [False], delivered
    return errors


def confluent_authentication(bootstrap: str, security: Security, topic: str) -> str:
    """confluent-kafka's authentication error (librdkafka's _AUTHENTICATION), as it prints it."""
    from confluent_kafka import KafkaError

    errors = confluent(bootstrap, security, topic)
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert auth, errors
    return str(auth[0])


@contextlib.contextmanager
def library_log(name: str):
    """The messages a client library logs (at WARNING and above) while the block runs: kafka-python
    and aiokafka log the broker's authentication error and raise only that bootstrap failed."""
    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    handler = Collect(logging.WARNING)
    logger = logging.getLogger(name)
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


def _lines(log: list[str], only: str | None) -> str:
    return "\n".join(line for line in log if only is None or only in line)


def kafka_python(bootstrap: str, security: Security, topic: str,
                 only: str | None = "SaslAuthenticationFailedError") -> str:
    """What kafka-python logs (the lines containing ``only``) when its producer cannot bootstrap
    (asserted: KafkaTimeoutError "Unable to bootstrap")."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    with library_log("kafka") as log:
        try:
            KafkaProducer(bootstrap_servers=bootstrap, bootstrap_timeout_ms=3000,
                          **kafka_python_config(security)).close(0)
        except KafkaTimeoutError as e:
            assert "Unable to bootstrap" in str(e), e
        else:
            raise AssertionError("kafka-python bootstrapped")
    return _lines(log, only)


def aiokafka(bootstrap: str, security: Security, topic: str,
             only: str | None = "SaslAuthenticationFailed") -> str:
    """What aiokafka logs (the lines containing ``only``; None: all) when its producer cannot
    bootstrap (asserted: KafkaConnectionError "Unable to bootstrap")."""
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaConnectionError

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **aiokafka_config(security))
        try:
            await producer.start()
        finally:
            await producer.stop()

    with library_log("aiokafka") as log:
        try:
            asyncio.run(asyncio.wait_for(run(), CLIENT_TIMEOUT_S))
        except KafkaConnectionError as e:
            assert "Unable to bootstrap" in str(e), e
        else:
            raise AssertionError("aiokafka bootstrapped")
    return _lines(log, only)


def kafkajs_error(bootstrap: str, security: Security, topic: str) -> str:
    """kafkajs's error, without retries, as ``ERROR <name>: <message>``."""
    answer = kafkajs.secured("produce", bootstrap, security, topic, [("k", "refused")], retries=0,
                             timeout=CLIENT_TIMEOUT_S)
    assert "error" in answer, answer
    return f"ERROR {answer['error']['name']}: {answer['error']['message']}"


def kcat_stderr(bootstrap: str, security: Security, topic: str) -> str:
    """What kcat prints on stderr, trying to produce one message for 5 s."""
    if kcat.BINARY is None:
        raise RuntimeError("kcat is not installed (make setup installs it)")
    proc = subprocess.run([kcat.BINARY, "-b", bootstrap, *kcat.kcat_options(security), "-P", "-t", topic,
                           "-p", "0", "-m", "5"], input=b"refused\n", capture_output=True,
                          timeout=CLIENT_TIMEOUT_S)
    return proc.stderr.decode(errors="replace")
