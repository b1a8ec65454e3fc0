// MQTT.js over WebSocket against estuaryd's --mqtt-ws port (driven by
// ws_process.py). usage: node mqtt_ws.js ws://HOST:PORT/mqtt
// Connects four clients (MQTT 5 and 3.1.1; their ids land on both shards),
// each subscribing to ws/in/<id> at QoS 1, then prints READY. Each message
// is printed "GOT <id> <payload>". Once all four came, each publishes
// ws/out/<id> (retained, QoS 1) and one publishes a 100,000-byte ws/big
// (retained, QoS 1: many WebSocket frames' worth), then prints SENT and
// exits 0 after a clean disconnect. Any error or 20 s without progress: exit 1.
// With ESTUARY_WS_CA=ca.pem (wss://): the server certificate must verify against it.
'use strict';
const fs = require('fs');
const mqtt = require('mqtt');

const url = process.argv[2];
const ids = ['ws-a', 'ws-b', 'ws-c', 'ws-d'];
const deadline = setTimeout(() => { console.log('TIMEOUT'); process.exit(1); }, 20000);
const clients = new Map();
let subscribed = 0;
const got = new Set();

function fail(what, error) {
  console.log(`ERROR ${what}: ${error && error.message ? error.message : error}`);
  process.exit(1);
}

function publishAll() {
  let pending = ids.length + 1;
  const done = (error) => {
    if (error) fail('publish', error);
    if (--pending > 0) return;
    console.log('SENT');
    let open = ids.length;
    for (const client of clients.values()) {
      client.end(false, {}, () => { if (--open === 0) { clearTimeout(deadline); process.exit(0); } });
    }
  };
  for (const [id, client] of clients) {
    client.publish(`ws/out/${id}`, `from-${id}`, { qos: 1, retain: true }, done);
  }
  clients.get('ws-a').publish('ws/big', Buffer.alloc(100000, 0x61), { qos: 1, retain: true }, done);
}

ids.forEach((id, index) => {
  const client = mqtt.connect(url, {
    clientId: id, protocolVersion: index % 2 === 0 ? 5 : 4, clean: true, reconnectPeriod: 0, connectTimeout: 10000,
    ...(process.env.ESTUARY_WS_CA ? { ca: fs.readFileSync(process.env.ESTUARY_WS_CA), rejectUnauthorized: true } : {}),
  });
  clients.set(id, client);
  client.on('error', (error) => fail(id, error));
  client.on('connect', () => {
    client.subscribe(`ws/in/${id}`, { qos: 1 }, (error) => {
      if (error) fail(`subscribe ${id}`, error);
      if (++subscribed === ids.length) console.log('READY');
    });
  });
  client.on('message', (topic, payload) => {
    console.log(`GOT ${id} ${payload.toString()}`);
    got.add(id);
    if (got.size === ids.length) publishAll();
  });
});
