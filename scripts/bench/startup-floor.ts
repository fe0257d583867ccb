/**
 * The floor of the API's cold start (`npm run bench startup`): a process that loads the libraries
 * an API process cannot start without (express, the mongodb driver, amqplib, zod, prom-client,
 * pino), makes one zod schema and one route, connects to MongoDB and RabbitMQ side by side and
 * listens. None of the service's own code runs. The bench bundles it as the API is bundled and
 * spawns it beside the bare hello: the gap between this and the API is ours, the gap between this
 * and the hello is the price of the libraries and the two connections.
 *
 * FLOOR_CONNECT=0 skips the connections (libraries only).
 */
import http from 'node:http';
import amqp from 'amqplib';
import express from 'express';
import { MongoClient } from 'mongodb';
import pino from 'pino';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { z } from 'zod';

const log = pino({ base: null });
const registry = new Registry();
collectDefaultMetrics({ register: registry });
const Body = z.object({ prompt: z.string().min(1).max(4000), name: z.string().max(120).optional() }).strict();
const app = express();
app.use(express.json({ limit: '1mb' }));
app.post('/code-builds', (req, res) => {
  const parsed = Body.safeParse(req.body);
  res.status(parsed.success ? 202 : 400).json({ ok: parsed.success });
});
app.get('/metrics', async (_req, res) => {
  res.type(registry.contentType).send(await registry.metrics());
});

if (process.env.FLOOR_CONNECT !== '0') {
  const mongo = new MongoClient(process.env.MONGODB_URL ?? 'mongodb://127.0.0.1:27017/floor', {
    serverSelectionTimeoutMS: 5000,
  });
  const [, connection] = await Promise.all([
    mongo.connect(),
    amqp.connect(process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672'),
  ]);
  // Keep them open, as the API does, until the bench stops the process.
  process.once(
    'SIGTERM',
    () => void Promise.allSettled([mongo.close(), connection.close()]).then(() => process.exit(0)),
  );
}
http.createServer(app).listen(0, () => log.info('floor ready'));
