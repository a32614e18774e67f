#!/usr/bin/env node
// kafkajs transactions for Strom's integration tests (tests/integration/test_transactions.py).
//
// argv[2]: {"bootstrap": "127.0.0.1:9092", "topic": "t", "transactionalId": "tid",
//           "committed": ["v", ...], "aborted": ["v", ...], "partitions": 2}
// One transactional producer sends "committed" in a transaction it commits, then "aborted"
// in one it aborts; the i-th value of each goes to partition i % partitions (partitions
// absent: kafkajs's partitioner chooses). Exit code 0 on success, 1 with the error on stderr.
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
    const messages = (values) => values.map((v, i) => (
      cmd.partitions ? { value: v, partition: i % cmd.partitions } : { value: v }));
    const committed = await producer.transaction();
    await committed.send({ topic: cmd.topic, messages: messages(cmd.committed) });
    await committed.commit();
    const aborted = await producer.transaction();
    await aborted.send({ topic: cmd.topic, messages: messages(cmd.aborted) });
    await aborted.abort();
  } finally {
    await producer.disconnect();
  }
}

main().then(() => process.exit(0), (e) => { console.error(e && e.stack || e); process.exit(1); });
