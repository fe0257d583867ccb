import amqplib from 'amqplib';
import { broker } from '../../contracts/registry';
import type { Config } from '../../platform/infra/config';

/** A real consumer bound to the events exchange: collects every event published during a test. */
export async function listenToEvents(config: Config, pattern = '#') {
  const conn = await amqplib.connect(config.AMQP_URL);
  const ch = await conn.createChannel();
  const { queue } = await ch.assertQueue('', { exclusive: true, autoDelete: true });
  await ch.bindQueue(queue, broker.eventsExchange(config.QUEUE_PREFIX), pattern);
  const events: { routingKey: string; body: any }[] = [];
  await ch.consume(queue, (m) => {
    if (!m) return;
    events.push({ routingKey: m.fields.routingKey, body: JSON.parse(m.content.toString()) });
    ch.ack(m);
  });
  return {
    events,
    async waitFor(pred: (e: { routingKey: string; body: any }) => boolean, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const hit = events.find(pred);
        if (hit) return hit;
        if (Date.now() > deadline) throw new Error('event not seen');
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    close: () => conn.close(),
  };
}
