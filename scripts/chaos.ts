/**
 * `npm run chaos [-- --<scenario>]`: fault runs against the compiled service under its
 * supervisor, on a fresh database and queue prefix, printed as a table of figures; the exit
 * status is 1 when a job was lost or duplicated or a credit is off. Scenarios (scripts/chaos/):
 *   (default) crash: the API and the worker process killed with SIGKILL under load.
 *   --broker-cluster: on a local three-node RabbitMQ cluster, the code queue's leader killed and
 *     restarted, then another node stopped and started, under 500 builds at 15/s.
 *   --db-faults: FerretDB killed, then PostgreSQL restarted, under a burst (a private database).
 */
import { runBrokerCluster } from './chaos/broker-cluster';
import { runCrash } from './chaos/crash';
import { runDbFaults } from './chaos/db-faults';

const scenarios: Record<string, () => Promise<boolean>> = {
  crash: runCrash,
  'broker-cluster': runBrokerCluster,
  'db-faults': runDbFaults,
};

const asked = process.argv
  .slice(2)
  .filter((a) => a.startsWith('--'))
  .map((a) => a.slice(2));
const unknown = asked.filter((a) => !(a in scenarios));
if (unknown.length) {
  console.error(
    `unknown scenario ${unknown.join(', ')}; scenarios: ${Object.keys(scenarios)
      .map((s) => `--${s}`)
      .join(' ')}`,
  );
  process.exit(2);
}
let ok = true;
for (const name of asked.length ? asked : ['crash']) ok = (await scenarios[name]!()) && ok;
process.exit(ok ? 0 : 1);
