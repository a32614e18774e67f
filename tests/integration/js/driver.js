#!/usr/bin/env node
// kafkajs driver for Strom's integration tests (tests/integration/clients/kafkajs.py).
//
// Input: one JSON command as argv[2], or on stdin when argv[2] is absent:
//   {"op": "produce" | "consume_assign" | "consume_group" | "create_topic" |
//          "describe_topic" | "describe_replicas" | "describe_topic_config" | "alter_topic_config" |
//          "delete_topic" | "reassign" | "list_reassignments" | "batch",
//    "bootstrap": "127.0.0.1:9092[,127.0.0.1:9093...]", "topic": "t", "timeout": 30, ...op arguments}
// Keys, values and header values travel as base64 (null stays null).
// Output: the last stdout line is {"ok": true, "result": ...} or {"ok": false, "error": "..."};
// exit code 0, 1 (error) or 2 (timeout). kafkajs logs go to stderr.
//
// "group_member" (command in argv[2], so stdin stays free) is a long-lived member of
// cmd.group subscribed to cmd.topic; "timeout" bounds its whole life. Before the last line
// it prints one JSON line per event of its consumer:
//   {"event": "join", "memberId": "...", "isLeader": bool, "partitions": [0, 3]}  GROUP_JOIN:
//       the assignment it got at its latest join + sync (kafkajs is eager: the whole set)
//   {"event": "rebalancing"}  REBALANCING: the coordinator said rebalance; it rejoins
//   {"event": "crash", "error": "...", "restart": bool}  CRASH
// It leaves the group (disconnect: LeaveGroup) on stdin EOF, SIGTERM or SIGINT.
//
// Codecs: gzip is built in; snappy via kafkajs-snappy (snappyjs, pure JS); lz4 via
// @2l/kafkajs-lz4 (lz4-napi, prebuilt binary shipped in npm packages, LZ4 frame format);
// zstd via @bokuweb/zstd-wasm (compress) and fzstd (decompress, pure JS; reads frames
// without a content size too). No package needs an install script.
'use strict';

const { Kafka, CompressionTypes, CompressionCodecs, ConfigResourceTypes, logLevel } = require('kafkajs');

const COMPRESSION = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
};

async function registerCodecs() {
  CompressionCodecs[CompressionTypes.Snappy] = require('kafkajs-snappy');
  const LZ4Codec = require('@2l/kafkajs-lz4');
  CompressionCodecs[CompressionTypes.LZ4] = new LZ4Codec().codec;
  const zstd = require('@bokuweb/zstd-wasm');
  const fzstd = require('fzstd');
  await zstd.init();
  CompressionCodecs[CompressionTypes.ZSTD] = () => ({
    compress: async (encoder) => Buffer.from(zstd.compress(encoder.buffer, 3)),
    decompress: async (buffer) => Buffer.from(fzstd.decompress(buffer)),
  });
}

const b64 = (s) => (s === null || s === undefined ? null : Buffer.from(s, 'base64'));
const unb64 = (b) => (b === null || b === undefined ? null : Buffer.from(b).toString('base64'));

function stderrLogger() {
  return ({ namespace, level, label, log }) => {
    const { message, ...extra } = log;
    process.stderr.write(`${label} [${namespace}] ${message} ${JSON.stringify(extra)}\n`);
  };
}

function client(cmd) {
  return new Kafka({
    clientId: 'strom-kafkajs-driver',
    brokers: cmd.bootstrap.split(','), // bootstrap.servers: one or more host:port, comma-separated
    connectionTimeout: 10000,
    requestTimeout: 15000,
    logLevel: logLevel.WARN,
    logCreator: stderrLogger,
    retry: { retries: 8, initialRetryTime: 100, maxRetryTime: 1000 },
  });
}

function headersOut(list) {
  const headers = {};
  for (const [name, value] of list || []) {
    const v = b64(value);
    if (name in headers) headers[name] = [].concat(headers[name], v);
    else headers[name] = v;
  }
  return headers;
}

function headersIn(obj) {
  const list = [];
  for (const [name, value] of Object.entries(obj || {})) {
    for (const v of [].concat(value)) list.push([name, unb64(v === undefined ? Buffer.alloc(0) : v)]);
  }
  return list;
}

async function produce(cmd) {
  const producer = client(cmd).producer({
    idempotent: !!cmd.idempotent,
    maxInFlightRequests: cmd.idempotent ? 1 : undefined,
    allowAutoTopicCreation: false,
    retry: { retries: cmd.idempotent ? 30 : 5, initialRetryTime: 100, maxRetryTime: 1000 },
  });
  await producer.connect();
  try {
    const messages = cmd.messages.map((m) => {
      const out = { key: b64(m.key), value: b64(m.value), headers: headersOut(m.headers) };
      if (m.partition !== null && m.partition !== undefined) out.partition = m.partition;
      return out;
    });
    await producer.send({
      topic: cmd.topic, messages, acks: cmd.acks, compression: COMPRESSION[cmd.compression],
      timeout: Math.round(cmd.timeout * 1000),
    });
  } finally {
    await producer.disconnect();
  }
  return null;
}

// kafkajs has no manual assignment: "assign" subscribes a fresh group from the beginning,
// never commits, and keeps only the asked partitions.
// maxWaitTimeInMs is the Java consumer's fetch.max.wait.ms default (kafkajs's is 5000):
// disconnect waits for every fetch in flight, and with partitions led by several brokers
// the fetchers of the drained ones sit in a long poll when the count is reached.
// cmd.isolation: "read_committed" or "read_uncommitted" (null: kafkajs's default,
// readUncommitted false, i.e. read_committed); cmd.partitionFetchBytes: maxBytesPerPartition
// (null: kafkajs's default).
async function consume(cmd, groupId, commit, partitions) {
  const consumer = client(cmd).consumer({
    groupId, sessionTimeout: 6000, heartbeatInterval: 500, rebalanceTimeout: 10000,
    maxWaitTimeInMs: 500, allowAutoTopicCreation: false,
    readUncommitted: cmd.isolation === 'read_uncommitted',
    ...(cmd.partitionFetchBytes ? { maxBytesPerPartition: cmd.partitionFetchBytes } : {}),
  });
  await consumer.connect();
  const records = [];
  try {
    await consumer.subscribe({ topics: [cmd.topic], fromBeginning: true });
    await new Promise((resolve, reject) => {
      let done = false;
      consumer.run({
        autoCommit: false,
        eachMessage: async ({ partition, message }) => {
          if (done || (partitions && !partitions.includes(partition))) return;
          records.push([partition, Number(message.offset), unb64(message.key), unb64(message.value),
            headersIn(message.headers)]);
          if (records.length < cmd.count) return;
          done = true;
          try {
            if (commit) {
              const last = new Map();
              for (const [p, o] of records) last.set(p, Math.max(last.get(p) ?? -1, o));
              await consumer.commitOffsets([...last].map(([p, o]) => ({
                topic: cmd.topic, partition: p, offset: String(o + 1),
              })));
            }
            resolve();
          } catch (e) {
            reject(e);
          }
        },
      }).catch(reject);
    });
  } finally {
    await consumer.disconnect();
  }
  return records;
}

function emit(event) {
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

async function groupMember(cmd) {
  const consumer = client(cmd).consumer({
    groupId: cmd.group, sessionTimeout: 6000, heartbeatInterval: 500, rebalanceTimeout: 10000,
    maxWaitTimeInMs: 200, allowAutoTopicCreation: false,
  });
  const { GROUP_JOIN, REBALANCING, CRASH } = consumer.events;
  consumer.on(GROUP_JOIN, ({ payload }) => emit({
    event: 'join', memberId: payload.memberId, isLeader: payload.isLeader,
    partitions: payload.memberAssignment[cmd.topic] || [],
  }));
  consumer.on(REBALANCING, () => emit({ event: 'rebalancing' }));
  consumer.on(CRASH, ({ payload }) => emit({
    event: 'crash', error: `${payload.error.name}: ${payload.error.message}`, restart: !!payload.restart,
  }));
  const leave = new Promise((resolve) => {
    process.stdin.on('end', resolve);
    process.stdin.on('close', resolve);
    process.stdin.resume();
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [cmd.topic], fromBeginning: true });
    await consumer.run({ autoCommit: false, eachMessage: async () => {} });
    await leave;
  } finally {
    await consumer.disconnect();
  }
  return null;
}

async function withAdmin(cmd, fn) {
  const admin = client(cmd).admin();
  await admin.connect();
  try {
    return await fn(admin);
  } finally {
    await admin.disconnect();
  }
}

const configEntries = (config) => Object.entries(config || {}).map(([name, value]) => ({ name, value: String(value) }));

const OPS = {
  produce,
  consume_assign: (cmd) => consume(cmd, `strom-assign-${process.pid}-${Date.now()}`, false, cmd.partitions),
  consume_group: (cmd) => consume(cmd, cmd.group, cmd.commit !== false, null),
  group_member: groupMember,
  create_topic: (cmd) => withAdmin(cmd, async (admin) => {
    const created = await admin.createTopics({
      topics: [{ topic: cmd.topic, numPartitions: cmd.partitions || 1,
        replicationFactor: cmd.replication_factor || 1, configEntries: configEntries(cmd.config) }],
      waitForLeaders: true, timeout: Math.round(cmd.timeout * 1000),
    });
    if (!created) throw new Error(`topic ${cmd.topic} already exists`);
    return null;
  }),
  describe_topic: (cmd) => withAdmin(cmd, async (admin) => {
    const md = await admin.fetchTopicMetadata({ topics: [cmd.topic] });
    const partitions = {};
    for (const p of md.topics[0].partitions) partitions[p.partitionId] = p.leader;
    return { partitions };
  }),
  describe_replicas: (cmd) => withAdmin(cmd, async (admin) => {
    const md = await admin.fetchTopicMetadata({ topics: [cmd.topic] });
    const partitions = {};
    for (const p of md.topics[0].partitions) partitions[p.partitionId] = [p.leader, p.replicas, p.isr];
    return partitions;
  }),
  describe_topic_config: (cmd) => withAdmin(cmd, async (admin) => {
    const res = await admin.describeConfigs({
      resources: [{ type: ConfigResourceTypes.TOPIC, name: cmd.topic }], includeSynonyms: false,
    });
    const [resource] = res.resources;
    if (resource.errorCode) throw new Error(`describeConfigs: ${resource.errorCode} ${resource.errorMessage}`);
    const out = {};
    for (const e of resource.configEntries) out[e.configName] = e.configValue;
    return out;
  }),
  alter_topic_config: (cmd) => withAdmin(cmd, async (admin) => {
    await admin.alterConfigs({
      validateOnly: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name: cmd.topic, configEntries: configEntries(cmd.config) }],
    });
    return null;
  }),
  // cmd.replicas: {partition: [broker ids]} (kafkajs cannot cancel one: no null replicas)
  reassign: (cmd) => withAdmin(cmd, async (admin) => {
    const partitionAssignment = Object.entries(cmd.replicas).map(([p, replicas]) => ({ partition: Number(p), replicas }));
    await admin.alterPartitionReassignments({
      topics: [{ topic: cmd.topic, partitionAssignment }], timeout: Math.round(cmd.timeout * 1000),
    });
    return null;
  }),
  // {partition: [replicas, addingReplicas, removingReplicas]} of the reassignments in progress
  list_reassignments: (cmd) => withAdmin(cmd, async (admin) => {
    const res = await admin.listPartitionReassignments({ timeout: Math.round(cmd.timeout * 1000) });
    const out = {};
    for (const t of res.topics) {
      if (t.name !== cmd.topic) continue;
      for (const p of t.partitions) out[p.partition] = [p.replicas, p.addingReplicas, p.removingReplicas];
    }
    return out;
  }),
  delete_topic: (cmd) => withAdmin(cmd, async (admin) => {
    await admin.deleteTopics({ topics: [cmd.topic], timeout: Math.round(cmd.timeout * 1000) });
    return null;
  }),
  // cmd.commands: several commands run one after the other in this one process, each with
  // cmd's bootstrap and timeout unless it has its own; the result is theirs, in order.
  batch: async (cmd) => {
    const results = [];
    for (const one of cmd.commands) {
      const op = OPS[one.op];
      if (!op || one.op === 'batch' || one.op === 'group_member') throw new Error(`unknown op ${one.op} in a batch`);
      results.push(await op({ bootstrap: cmd.bootstrap, timeout: cmd.timeout, ...one }));
    }
    return results;
  },
};

function finish(code, payload) {
  process.stdout.write(`${JSON.stringify(payload)}\n`, () => process.exit(code));
}

async function readCommand() {
  if (process.argv[2]) return JSON.parse(process.argv[2]);
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

async function main() {
  const cmd = await readCommand();
  const timeout = cmd.timeout || 30;
  setTimeout(() => finish(2, { ok: false, error: `timeout after ${timeout} s` }), timeout * 1000);
  const op = OPS[cmd.op];
  if (!op) throw new Error(`unknown op ${cmd.op}`);
  await registerCodecs();
  finish(0, { ok: true, result: await op(cmd) });
}

main().catch((e) => finish(1, { ok: false, error: `${e.name}: ${e.message}` }));
