// kafkajs over a secured listener (see security.py's kafkajs_config and kafkajs.py's secured()).
// argv[2]: {"op": "produce" | "consume" | "transaction", "bootstrap", "security": {"ssl": {ca, cert,
// key, checkHostname} | null, "sasl": {mechanism, username, password} | {mechanism: "oauthbearer",
// token} | null}, "retries", "consumerRetries" (null: kafkajs's default), "topic", "group", "txnId", "messages": [[key, value], ...]}.
// Prints one JSON line: {"ok": true}, {"got": [[key, value], ...]} or {"error": {name, message,
// cause (the innermost cause's type: kafkajs wraps a refused request in KafkaJSNonRetriableError),
// logged (the errors kafkajs logged on the way: it reports a refused FindCoordinator only as
// KafkaJSGroupCoordinatorNotFound, having logged the broker's error at debug level)}}.
const { Kafka, logLevel } = require(process.env.KAFKAJS_PATH);
const fs = require('fs');

const c = JSON.parse(process.argv[2]);
const logged = [];
const logCreator = () => ({ log }) => {
  const e = log && log.error;
  if (e) logged.push(typeof e === 'string' ? e : (e.type || e.message || String(e)));
};

function ssl(s) {
  if (!s) return false;
  const out = { ca: [fs.readFileSync(s.ca, 'utf8')] };
  if (s.cert) {
    out.cert = fs.readFileSync(s.cert, 'utf8');
    out.key = fs.readFileSync(s.key, 'utf8');
  }
  if (!s.checkHostname) out.checkServerIdentity = () => undefined;
  return out;
}

function sasl(s) {
  if (!s) return undefined;
  if (s.mechanism === 'oauthbearer') {
    return { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value: s.token }) };
  }
  return { mechanism: s.mechanism, username: s.username, password: s.password };
}

const kafka = new Kafka({ clientId: 'strom-secured-test', brokers: c.bootstrap.split(','),
  logLevel: logLevel.DEBUG, logCreator, ssl: ssl(c.security.ssl), sasl: sasl(c.security.sasl),
  retry: { retries: c.retries } });
const print = (o) => console.log(JSON.stringify(o));
const messages = () => c.messages.map(([k, v]) => ({ key: k, value: v }));

async function produce() {
  const producer = kafka.producer();
  await producer.connect();
  try {
    await producer.send({ topic: c.topic, messages: messages() });
  } finally { await producer.disconnect(); }
  return { ok: true };
}

async function transaction() {
  const producer = kafka.producer({ transactionalId: c.txnId, idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  try {
    const txn = await producer.transaction();
    await txn.send({ topic: c.topic, messages: messages() });
    await txn.commit();
  } finally { await producer.disconnect(); }
  return { ok: true };
}

async function consume() {
  const consumer = kafka.consumer({ groupId: c.group,
    ...(c.consumerRetries === null ? {} : { retry: { retries: c.consumerRetries } }) });
  const got = [];
  let crashed = null;
  consumer.on(consumer.events.CRASH, (ev) => { crashed = ev.payload.error; });
  await consumer.connect();
  try {
    await consumer.subscribe({ topic: c.topic, fromBeginning: true });
    await new Promise((resolve, reject) => {
      const timer = setInterval(() => { if (crashed) { clearInterval(timer); reject(crashed); } }, 50);
      consumer.run({ eachMessage: async ({ message }) => {
        got.push([message.key.toString(), message.value.toString()]);
        if (got.length === c.messages.length) { clearInterval(timer); resolve(); }
      } }).catch(reject);
    });
  } finally { await consumer.disconnect(); }
  return { got };
}

const OPS = { produce, transaction, consume };
OPS[c.op]().then(print).catch((e) => {
  let cause = e;
  while (cause && cause.cause) cause = cause.cause;
  print({ error: { name: (e && e.name) || 'Error', message: (e && e.message) || String(e),
                   cause: (cause && (cause.type || cause.name)) || String(cause), logged } });
});
