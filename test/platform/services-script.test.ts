import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { projectRoot } from '../../scripts/harness/worker-process';

/**
 * scripts/services.sh is a guest on a shared machine: a server it did not start that is slow or
 * wedged is waited for (SERVICES_WAIT_SECONDS) and reported, never stopped; two runs at once take
 * turns on a machine-wide lock. The slow and wedged servers here are fakes on free ports, named
 * to the script through AMQP_URL and MONGODB_URL; rabbitmqctl and rabbitmq-server are stubs that
 * record their calls (the rabbitmq-server stub starts a fake broker named beam.smp, as the real
 * Erlang VM is), so nothing here can reach the machine's real broker.
 */

type Answer = (socket: net.Socket, request: Buffer) => void;

interface Fake {
  port: number;
  /** Connections accepted so far. */
  connections: number;
  close(): Promise<void>;
}

/** A TCP server on a free port that accepts and hands the first bytes of each connection to `answer` (or never answers). */
function fakeServer(answer?: Answer): Promise<Fake> {
  const sockets = new Set<net.Socket>();
  const fake = { port: 0, connections: 0 } as Fake;
  const server = net.createServer((socket) => {
    fake.connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    socket.once('data', (request) => answer?.(socket, request));
  });
  fake.close = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve(Object.assign(fake, { port: (server.address() as net.AddressInfo).port })),
    ),
  );
}

/** Answers the AMQP protocol header with one byte (the script reads one) once `delayMs` have passed. */
const amqpAfter =
  (delayMs: number): Answer =>
  (socket) =>
    void setTimeout(() => socket.writable && socket.write(Buffer.from([1])), delayMs);

/** An OP_MSG reply {ok: 1.0} to the request's id, once the server is awake (`awakeAt`, epoch ms). */
const mongoOkFrom =
  (awakeAt: number): Answer =>
  (socket, request) => {
    const doc = Buffer.from([17, 0, 0, 0, 0x01, 0x6f, 0x6b, 0, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0]); // BSON {ok: 1.0}
    const reply = Buffer.alloc(16 + 4 + 1 + doc.length);
    reply.writeInt32LE(reply.length, 0);
    reply.writeInt32LE(1, 4);
    reply.writeInt32LE(request.readInt32LE(4), 8); // responseTo
    reply.writeInt32LE(2013, 12); // OP_MSG; flag bits 0, section kind 0
    doc.copy(reply, 21);
    setTimeout(() => socket.writable && socket.write(reply), Math.max(0, awakeAt - Date.now()));
  };

const stillListening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });

describe('scripts/services.sh on a shared machine', function () {
  this.timeout(60_000);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-services-test-'));
  const calls = path.join(dir, 'calls.log');
  const lockFile = path.join(dir, 'services.lock');
  const running = new Set<ChildProcess>();
  const fakes: Fake[] = [];

  const beamPidFile = path.join(dir, 'beam.pid');

  before(() => {
    // Stubs ahead of the real tools on PATH: any call is recorded, none reaches the machine's broker.
    // rabbitmq-server starts the fake broker on AMQP_URL's port; rabbitmqctl answers only eval (its pid).
    const stub = (tool: string, body: string) => {
      writeFileSync(path.join(dir, tool), `#!/bin/sh\necho "${tool} $*" >>"${calls}"\n${body}\n`);
      chmodSync(path.join(dir, tool), 0o755);
    };
    stub(
      'rabbitmq-server',
      `"${process.execPath}" "${dir}/fake-beam.cjs" "\${AMQP_URL##*:}" "${calls}" </dev/null >/dev/null 2>&1 &\necho $! >"${beamPidFile}"`,
    );
    stub('rabbitmqctl', `case "$*" in *eval*) cat "${beamPidFile}"; exit 0 ;; esac\nexit 1`);
    // SIGUSR1 wedges it: it keeps accepting and stops answering the protocol header.
    writeFileSync(
      path.join(dir, 'fake-beam.cjs'),
      `process.title = 'beam.smp';
const net = require('node:net');
let wedged = false;
process.on('SIGUSR1', () => (wedged = true));
process.on('SIGTERM', () => (require('node:fs').appendFileSync(process.argv[3], 'beam.smp SIGTERM\\n'), process.exit(0)));
net.createServer((s) => (s.on('error', () => {}), s.once('data', () => wedged || s.write(Buffer.from([1]))))).listen(Number(process.argv[2]), '127.0.0.1');
`,
    );
  });
  beforeEach(() => writeFileSync(calls, ''));
  afterEach(async () => {
    if (existsSync(beamPidFile)) {
      try {
        process.kill(Number(readFileSync(beamPidFile, 'utf8')), 'SIGKILL');
      } catch {
        // already gone
      }
      rmSync(beamPidFile);
    }
    for (const child of running) {
      if (child.exitCode === null && child.signalCode === null) {
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }
    running.clear();
    await Promise.all(fakes.splice(0).map((f) => f.close()));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const fake = async (answer?: Answer) => {
    const f = await fakeServer(answer);
    fakes.push(f);
    return f;
  };

  /**
   * Runs the script to its end, in its own process group (killed in afterEach if a test gives up on
   * it). By default with the stubs and this suite's lock file; `machine`: the real tools and the
   * machine-wide lock.
   */
  function run(env: Record<string, string>, opts: { machine?: boolean } = {}) {
    const t0 = Date.now();
    const child = spawn('bash', ['scripts/services.sh'], {
      cwd: projectRoot,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        ...(opts.machine ? {} : { SERVICES_LOCK_FILE: lockFile, PATH: `${dir}:${process.env.PATH}` }),
        ...env,
      },
    });
    running.add(child);
    let output = '';
    child.stdout!.on('data', (d) => (output += d));
    child.stderr!.on('data', (d) => (output += d));
    return new Promise<{ code: number | null; output: string; ms: number }>((resolve) =>
      child.on('close', (code) => resolve({ code, output, ms: Date.now() - t0 })),
    );
  }

  it('when a RabbitMQ it did not start accepts TCP but never answers AMQP, then it waits the bound, fails naming the port, and leaves the server running', async () => {
    const amqp = await fake();
    const r = await run({ SERVICES_WAIT_SECONDS: '2', AMQP_URL: `amqp://guest:guest@127.0.0.1:${amqp.port}` });
    expect(r.code, r.output).to.equal(1);
    expect(r.ms, r.output).to.be.within(2000, 15_000); // the bound, then out (a loaded machine adds seconds, not minutes)
    expect(r.output).to.contain(
      `RabbitMQ on 127.0.0.1:${amqp.port} accepts connections but has not answered AMQP for 2 s`,
    );
    expect(r.output).to.contain('it was not started by this script, so it is left alone');
    expect(r.output).to.not.match(/stopping|starting/);
    expect(amqp.connections, 'the script checked it').to.be.greaterThan(0);
    expect(await stillListening(amqp.port)).to.equal(true);
    expect(readFileSync(calls, 'utf8'), 'no rabbitmqctl or rabbitmq-server call').to.equal('');
    expect(existsSync(path.join(projectRoot, `.tools/state/rabbitmq-${amqp.port}.pid`))).to.equal(false);
  });

  it('when a MongoDB-compatible server it did not start accepts TCP but never answers ping, then it waits the bound, fails naming the port, and starts no FerretDB', async () => {
    const amqp = await fake(amqpAfter(0));
    const mongo = await fake();
    const r = await run({
      SERVICES_WAIT_SECONDS: '2',
      AMQP_URL: `amqp://guest:guest@127.0.0.1:${amqp.port}`,
      MONGODB_URL: `mongodb://127.0.0.1:${mongo.port}/svc`,
    });
    expect(r.code, r.output).to.equal(1);
    expect(r.ms, r.output).to.be.within(2000, 15_000); // the bound, then out (a loaded machine adds seconds, not minutes)
    expect(r.output).to.contain(`RabbitMQ answers on 127.0.0.1:${amqp.port}`);
    expect(r.output).to.contain(
      `the MongoDB-compatible server on 127.0.0.1:${mongo.port} accepts connections but has not answered ping (ok: 1) for 2 s`,
    );
    expect(r.output).to.contain('it was not started by this script, so it is left alone');
    expect(r.output).to.not.match(/stopping|starting/);
    expect(await stillListening(mongo.port)).to.equal(true);
    expect(existsSync(path.join(projectRoot, `.tools/state/ferretdb-${mongo.port}.pid`))).to.equal(false);
  });

  it('when RabbitMQ answers each handshake only after 2.5 s, then it is accepted within the bound (a slow server is not a dead one)', async () => {
    const amqp = await fake(amqpAfter(2500));
    const mongo = await fake(mongoOkFrom(0));
    const r = await run({
      SERVICES_WAIT_SECONDS: '10',
      AMQP_URL: `amqp://guest:guest@127.0.0.1:${amqp.port}`,
      MONGODB_URL: `mongodb://127.0.0.1:${mongo.port}/svc`,
    });
    expect(r.code, r.output).to.equal(0);
    expect(r.ms, r.output).to.be.within(2500, 20_000);
    expect(r.output).to.contain(`RabbitMQ answers on 127.0.0.1:${amqp.port}`);
    expect(r.output).to.contain(`MongoDB-compatible server answers ping on 127.0.0.1:${mongo.port}`);
    expect(readFileSync(calls, 'utf8')).to.equal('');
  });

  it('when the MongoDB-compatible server answers ping only after 3 s, then it is accepted within the bound', async () => {
    const amqp = await fake(amqpAfter(0));
    const mongo = await fake(mongoOkFrom(Date.now() + 3000));
    const r = await run({
      SERVICES_WAIT_SECONDS: '10',
      AMQP_URL: `amqp://guest:guest@127.0.0.1:${amqp.port}`,
      MONGODB_URL: `mongodb://127.0.0.1:${mongo.port}/svc`,
    });
    expect(r.code, r.output).to.equal(0);
    expect(r.ms, r.output).to.be.within(2500, 20_000);
    expect(r.output).to.contain(`MongoDB-compatible server answers ping on 127.0.0.1:${mongo.port}`);
    expect(r.output).to.not.match(/stopping|starting/);
  });

  it('when another run holds the lock, then it waits for it, bounded, with a message naming the lock', async () => {
    const amqp = await fake(amqpAfter(0));
    const mongo = await fake(mongoOkFrom(0));
    const env = {
      AMQP_URL: `amqp://guest:guest@127.0.0.1:${amqp.port}`,
      MONGODB_URL: `mongodb://127.0.0.1:${mongo.port}/svc`,
    };
    const holder = spawn('flock', [lockFile, 'sh', '-c', 'echo locked; exec sleep 30'], {
      detached: true,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    running.add(holder);
    await new Promise((resolve) => holder.stdout!.once('data', resolve));

    const refused = await run({ ...env, SERVICES_LOCK_WAIT_SECONDS: '1' });
    expect(refused.code, refused.output).to.equal(1);
    expect(refused.output).to.contain(`waited 1 s for the lock ${lockFile}`);
    expect(refused.output).to.not.contain('answers');

    const waiting = run({ ...env, SERVICES_LOCK_WAIT_SECONDS: '20' });
    setTimeout(() => process.kill(-holder.pid!, 'SIGKILL'), 1000);
    const r = await waiting;
    expect(r.code, r.output).to.equal(0);
    expect(r.output).to.contain(`waiting for another scripts/services.sh to finish (the lock ${lockFile})`);
    expect(r.output).to.contain(`MongoDB-compatible server answers ping on 127.0.0.1:${mongo.port}`);
  });

  it('when nothing listens on the AMQP port, then it starts RabbitMQ and records its pid; when that broker is slow later, it is left running and the script fails naming its pid', async () => {
    // free, nothing listens
    const port = await fake().then(async (f) => {
      await f.close();
      return f.port;
    });
    const mongo = await fake(mongoOkFrom(0));
    const ourPidFile = path.join(projectRoot, `.tools/state/rabbitmq-${port}.pid`);
    const env = {
      SERVICES_WAIT_SECONDS: '2',
      AMQP_URL: `amqp://guest:guest@127.0.0.1:${port}`,
      MONGODB_URL: `mongodb://127.0.0.1:${mongo.port}/svc`,
    };
    try {
      const started = await run(env);
      expect(started.code, started.output).to.equal(0);
      const pid = readFileSync(beamPidFile, 'utf8').trim();
      expect(started.output).to.contain('starting the local RabbitMQ (rabbitmq-server -detached)');
      expect(started.output).to.contain(
        `RabbitMQ is up (started by this script: pid ${pid} in .tools/state/rabbitmq-${port}.pid)`,
      );
      // The pid and its start time (a reused pid is another process).
      expect(readFileSync(ourPidFile, 'utf8').trim()).to.match(new RegExp(`^${pid} \\d+$`));
      expect(readFileSync(calls, 'utf8')).to.contain('rabbitmq-server -detached');
      // The server it started outlives the script but does not keep the lock.
      expect(spawnSync('flock', ['-n', lockFile, 'true']).status, 'the lock is free').to.equal(0);

      process.kill(Number(pid), 'SIGUSR1'); // it keeps accepting and stops answering
      const slow = await run(env);
      expect(slow.code, slow.output).to.equal(1);
      expect(slow.output).to.contain(`(pid ${pid}, started by this script)`);
      expect(slow.output).to.contain('so it is left alone');
      expect(readFileSync(calls, 'utf8')).to.not.contain('beam.smp SIGTERM');
      expect(() => process.kill(Number(pid), 0), 'the broker still runs').not.to.throw();
    } finally {
      rmSync(ourPidFile, { force: true });
    }
  });

  it('when two runs start at once on the real services, then both succeed and neither starts a server', async () => {
    // The machine-wide lock and the real servers, untouched: both answer, so each run only checks.
    const env = { SERVICES_WAIT_SECONDS: '30' };
    const [a, b] = await Promise.all([run(env, { machine: true }), run(env, { machine: true })]);
    for (const r of [a, b]) {
      expect(r.code, r.output).to.equal(0);
      expect(r.output).to.match(/RabbitMQ answers on/);
      expect(r.output).to.match(/MongoDB-compatible server answers ping on/);
      expect(r.output).to.not.match(/stopping|starting|restarting/);
    }
  });
});
