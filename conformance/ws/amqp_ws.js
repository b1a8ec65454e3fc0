// rhea (AMQP 1.0) over WebSocket, with the ws package, against estuaryd's
// --amqp-ws port (driven by ws_process.py). usage: node amqp_ws.js ws://HOST:PORT
// Two connections (container ids that land on both shards): the first has a
// receiver on ws/amqp, the second a receiver on ws/amqp-loop and a sender
// to it. Prints READY once both receivers are attached; a message on
// ws/amqp is printed "GOT ws/amqp <body>"; then the sender sends
// "loop-<n>" x 3 and each that comes back is printed "GOT ws/amqp-loop
// <body>"; exits 0 after closing both connections. Error or 20 s: exit 1.
'use strict';
const container = require('rhea');
const WebSocket = require('ws');

const url = process.argv[2];
const connect = container.websocket_connect(WebSocket);
const deadline = setTimeout(() => { console.log('TIMEOUT'); process.exit(1); }, 20000);
let attached = 0;
let looped = 0;
let sender = null;
const connections = [];

container.on('error', (context) => { console.log(`ERROR ${context.error}`); process.exit(1); });
container.on('disconnected', (context) => {
  if (context.error) { console.log(`ERROR disconnected ${context.error}`); process.exit(1); }
});
container.on('receiver_open', () => { if (++attached === 2) console.log('READY'); });
container.on('message', (context) => {
  const address = context.receiver.source.address;
  const body = context.message.body;
  const text = Buffer.isBuffer(body) ? body.toString() : (body && body.content ? Buffer.from(body.content).toString() : String(body));
  console.log(`GOT ${address} ${text}`);
  if (address === 'ws/amqp') {
    for (let n = 1; n <= 3; ++n) sender.send({ body: `loop-${n}` });
  } else if (++looped === 3) {
    let open = connections.length;
    container.on('connection_close', () => { if (--open === 0) { clearTimeout(deadline); process.exit(0); } });
    for (const connection of connections) connection.close();
  }
});

for (const id of ['ws-amqp-1', 'ws-amqp-2']) {
  connections.push(container.connect({
    connection_details: connect(url, ['amqp'], {}), container_id: id, reconnect: false,
  }));
}
connections[0].open_receiver('ws/amqp');
connections[1].open_receiver('ws/amqp-loop');
sender = connections[1].open_sender('ws/amqp-loop');
