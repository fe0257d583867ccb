// A stand-in API process for test/workers/front-door.test.ts: serves the sockets the front door
// hands it over IPC (acknowledging each before reading it, as api/supervised.ts does), answering
// {"servedBy": NAME}.
import http from 'node:http';

const name = process.env.NAME;
const server = http.createServer((_req, res) => {
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ servedBy: name }));
});
process.on('message', (m, socket) => {
  if (m?.t !== 'conn' || !socket) return;
  process.send({ t: 'took', seq: m.seq });
  server.emit('connection', socket);
});
process.send({ t: 'ready' });
