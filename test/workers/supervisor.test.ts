import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { loadConfig } from '../../platform/config';
import { client, eventually } from '../helpers/http';
import { dropEverything, freePort, recordQueuePrefix } from '../helpers/stack';
import { projectRoot } from '../helpers/worker-process';

/** The parent process id of `pid`, from /proc (Linux). */
const parentOf = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '').split(' ')[1]);

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('supervisor (npm start)', () => {
  let supervisor: ChildProcess | undefined;
  let output = '';
  const id = randomBytes(4).toString('hex');
  let env: Record<string, string>;

  before(async () => {
    const port = await freePort();
    env = {
      NODE_ENV: 'test',
      LOG_LEVEL: 'warn',
      PORT: String(port),
      PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
      MONGODB_URL: `${(process.env.MONGODB_URL ?? 'mongodb://127.0.0.1:27017/svc').replace(/\/[^/?]*(\?.*)?$/, '')}/t_${id}`,
      AMQP_URL: process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
      QUEUE_PREFIX: recordQueuePrefix(`t${id}.`),
      QUEUE_TYPE: 'classic',
      WORKER_POOLS: 'code',
      WORKER_METRICS_PORT: '0',
      SCHEDULER_METRICS_PORT: '0',
      SHUTDOWN_GRACE_MS: '5000',
      API_PROCESSES: '2',
      SERVED_BY_HEADER: 'true',
    };
  });

  after(async () => {
    if (supervisor && supervisor.exitCode === null && supervisor.signalCode === null) {
      supervisor.kill('SIGKILL'); // its API processes leave when their IPC channel closes
    }
    await dropEverything(loadConfig(env)); // also the names the child processes declared
  });

  it('when API_PROCESSES=2, then two API processes answer on one port, a killed one comes back, and SIGTERM stops them all', async function () {
    this.timeout(180_000);
    supervisor = spawn(process.execPath, ['--import', 'tsx', 'scripts/supervisor.ts'], {
      cwd: projectRoot,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    supervisor.stdout!.on('data', (d) => (output += d));
    supervisor.stderr!.on('data', (d) => (output += d));
    const pid = supervisor.pid!;
    try {
      // The bootstrap made the development account on the fresh database and printed its key once.
      const key = (await eventually(async () => /\b(svc_[A-Za-z0-9_-]{43})\b/.exec(output)?.[1], 60_000, `the development key in:\n${output}`))!;
      const api = client(`http://127.0.0.1:${env.PORT}/api/v1`, key);

      // A new connection per request, so the cluster hands requests to the processes in turn.
      const servedBy = async () => {
        const r = await api.get('/account', { connection: 'close' });
        expect(r.status, r.text).to.equal(200);
        expect(r.body.id).to.equal('acct_development');
        return Number(r.headers.get('x-served-by'));
      };
      const twoProcesses = async (what: string) => {
        const seen = new Set<number>();
        await eventually(
          async () => {
            seen.clear();
            for (let i = 0; i < 6; i++) seen.add(await servedBy().catch(() => NaN));
            return seen.size === 2 && [...seen].every((p) => Number.isInteger(p));
          },
          90_000,
          `${what}; saw ${[...seen]}; output:\n${output}`,
        );
        return [...seen];
      };

      const first = await twoProcesses('two API processes answering');
      for (const p of first) expect(parentOf(p), `pid ${p} is a child of the supervisor`).to.equal(pid);

      const [victim, survivor] = first as [number, number];
      process.kill(victim, 'SIGKILL');
      await eventually(async () => !alive(victim), 10_000, 'the killed API process to go');
      const second = await twoProcesses('the killed API process to be replaced');
      expect(second).to.include(survivor);
      expect(second).not.to.include(victim);
      const replacement = second.find((p) => p !== survivor)!;
      expect(parentOf(replacement)).to.equal(pid);
      expect(output).to.match(new RegExp(`api#\\d \\(pid ${victim}\\) exited \\(SIGKILL\\); restarting`));

      supervisor.kill('SIGTERM');
      const [code] = await once(supervisor, 'exit');
      expect(code, output).to.equal(0);
      expect(alive(survivor)).to.equal(false);
      expect(alive(replacement)).to.equal(false);
    } finally {
      if (supervisor.exitCode === null && supervisor.signalCode === null) supervisor.kill('SIGKILL');
    }
  });
});
