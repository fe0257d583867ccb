import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { projectRoot } from '../../scripts/harness/worker-process';

const run = promisify(execFile);
const script = path.join(projectRoot, 'scripts/rabbitmq-cluster.sh');

/** scripts/rabbitmq-cluster.sh in a directory and port range of its own, with what it printed and its exit status. */
async function cluster(dir: string, basePort: number, ...args: string[]) {
  const env = {
    ...process.env,
    RMQ_CLUSTER_DIR: dir,
    RMQ_CLUSTER_BASE_PORT: String(basePort),
    RMQ_CLUSTER_LOCK_FILE: path.join(dir, 'lock'),
  };
  try {
    const { stdout, stderr } = await run('bash', [script, ...args], { env, timeout: 30_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('scripts/rabbitmq-cluster.sh (without starting RabbitMQ)', () => {
  let dir: string;
  let holder: net.Server | undefined;
  // A range of its own, below the ephemeral ports and away from the suite's cluster (25700).
  const base = 26_000 + 20 * Math.floor(Math.random() * 100);

  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'rmq-cluster-'));
  });
  afterEach(async () => {
    await new Promise<void>((r) => (holder ? holder.close(() => r()) : r()));
    holder = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  it('when a port of its range is taken by another process, then up fails naming that port and starts nothing', async () => {
    holder = net.createServer();
    await new Promise<void>((r) => holder!.listen(base + 12, '127.0.0.1', r)); // node 2's distribution port
    const r = await cluster(dir, base, 'up');
    expect(r.code).to.equal(1);
    expect(r.stderr).to.include(`port ${base + 12} (node 2) is taken by a process this script did not start`);
    expect(existsSync(path.join(dir, 'epmd.pid'))).to.equal(false);
    for (const n of [1, 2, 3]) expect(existsSync(path.join(dir, `node${n}`, 'wrapper.pid'))).to.equal(false);
  });

  it('when nothing runs, then status lists three stopped nodes and the AMQP_URL, and kill refuses (it kills only what it started)', async () => {
    const s = await cluster(dir, base, 'status');
    expect(s.code).to.equal(0);
    for (const n of [1, 2, 3])
      expect(s.stdout).to.match(
        new RegExp(
          `^svc-rmq${n}@localhost\\t-\\t127\\.0\\.0\\.1:${base + n} \\(dist ${base + 10 + n}\\)\\tstopped$`,
          'm',
        ),
      );
    expect(s.stdout.trim().split('\n').at(-1)).to.equal(
      [1, 2, 3].map((n) => `amqp://guest:guest@127.0.0.1:${base + n}`).join(','),
    );
    const k = await cluster(dir, base, 'kill', '2');
    expect(k.code).to.equal(1);
    expect(k.stderr).to.include('node 2 is not running');
    expect((await cluster(dir, base, 'kill', '4')).stderr).to.include('which node? 1, 2 or 3');
  });
});
