import { POOL_TYPES } from '../../contracts/registry';
import { AmqpClient } from '../../platform/infra/amqp';
import { loadConfig } from '../../platform/infra/config';
import { createLogger } from '../../platform/infra/log';
import { recordQueuePrefix } from '../../scripts/harness/broker-hygiene';
import { dropEverything } from '../../scripts/harness/stack';

const AMQP_URL = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';

/**
 * Two AmqpClients on the real broker, a caller and a worker, for request/reply tests: started in
 * a mocha `before` of the calling suite, closed in its `after`, which also drops the prefix's
 * queues and database. Read them in the suite's own hooks and tests (they exist once `before` ran).
 */
export function useAmqpPair(prefix: string, queueType: 'classic' | 'quorum') {
  recordQueuePrefix(prefix);
  const topology = { prefix, queueType, deliveryLimit: 5, pools: POOL_TYPES };
  const log = createLogger('silent');
  /** `another()`: one more client on the same topology, not started (the test closes it). */
  const pair = { another: () => new AmqpClient(AMQP_URL, topology, log) } as {
    caller: AmqpClient;
    worker: AmqpClient;
    another(): AmqpClient;
  };
  before(async () => {
    pair.caller = pair.another();
    pair.worker = pair.another();
    await pair.caller.start();
    await pair.worker.start();
  });
  after(async () => {
    await pair.caller.close();
    await pair.worker.close();
    const base = (process.env.MONGODB_URL ?? 'mongodb://127.0.0.1:27017/svc').replace(/\/[^/?]*(\?.*)?$/, '');
    await dropEverything(
      loadConfig({ AMQP_URL, QUEUE_PREFIX: prefix, MONGODB_URL: `${base}/${prefix.replace('.', '')}` }),
    );
  });
  return pair;
}
