#!/usr/bin/env node
// kafkajs transactions for Strom's integration tests (tests/integration/test_transactions.py).
//
// argv[2]: {"bootstrap": "127.0.0.1:9092", "topic": "t", "transactionalId": "tid",
//           "committed": ["v", ...], "aborted": ["v", ...]}
// One transactional producer sends "committed" in a transaction it commits, then "aborted"
// in one it aborts. Exit code 0 on success, 1 with the error on stderr.
'use strict';

const { Kafka, logLevel } = require('kafkajs');

async function main() {
  const cmd = JSON.parse(process.argv[2]);
  const kafka = new Kafka({ clientId: 'strom-txn-test', brokers: cmd.bootstrap.split(','),
                            logLevel: logLevel.ERROR });
  const producer = kafka.producer({ transactionalId: cmd.transactionalId, idempotent: true,
                                    maxInFlightRequests: 1 });
  await producer.connect();
  try {
    const committed = await producer.transaction();
    await committed.send({ topic: cmd.topic, messages: cmd.committed.map((v) => ({ value: v })) });
    await committed.commit();
    const aborted = await producer.transaction();
    await aborted.send({ topic: cmd.topic, messages: cmd.aborted.map((v) => ({ value: v })) });
    await aborted.abort();
  } finally {
    await producer.disconnect();
  }
}

main().then(() => process.exit(0), (e) => { console.error(e && e.stack || e); process.exit(1); });
