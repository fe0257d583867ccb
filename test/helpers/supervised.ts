import { randomBytes } from 'node:crypto';
import { freePort, recordQueuePrefix } from '../../scripts/harness/stack';

/**
 * The environment of a real supervisor a test spawns: free API and metrics ports, a fresh
 * database and queue prefix on the configured servers (dropped by the test), classic queues,
 * quiet logs, a short shutdown grace, and `extra` on top.
 */
export async function supervisorEnv(extra: Record<string, string> = {}) {
  const id = randomBytes(4).toString('hex');
  const port = await freePort();
  const metricsPort = await freePort();
  const server = (process.env.MONGODB_URL ?? 'mongodb://127.0.0.1:27017/svc').replace(/\/[^/?]*(\?.*)?$/, '');
  const env: Record<string, string> = {
    NODE_ENV: 'test',
    LOG_LEVEL: 'warn',
    PORT: String(port),
    METRICS_PORT: String(metricsPort),
    PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
    MONGODB_URL: `${server}/t_${id}`,
    AMQP_URL: process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
    QUEUE_PREFIX: recordQueuePrefix(`t${id}.`),
    QUEUE_TYPE: 'classic',
    SHUTDOWN_GRACE_MS: '5000',
    SERVED_BY_HEADER: 'true',
    ...extra,
  };
  return { env, port, metricsPort };
}
