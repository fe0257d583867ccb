import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { Registry } from 'prom-client';
import { createLogger } from '../../platform/infra/log';
import { FrontDoor, type Backend } from '../../scripts/supervisor/front-door';

/** One GET over a new connection; the status, the body and how long it took. */
function get(port: number): Promise<{ status: number; body: any; headers: http.IncomingHttpHeaders; ms: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/x', agent: false }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () =>
        resolve({
          status: res.statusCode!,
          body: JSON.parse(text),
          headers: res.headers,
          ms: performance.now() - started,
        }),
      );
    });
    req.on('error', reject);
  });
}

/**
 * The supervisor's front door (scripts/supervisor/front-door.ts): connections go to ready API
 * processes in turn; while none is ready they wait, bounded, and then get a 503 in the Error
 * shape instead of a refused connection.
 */
describe('supervisor front door', () => {
  let door: FrontDoor;
  let port: number;
  const children: ChildProcess[] = [];

  /** A real process behind the door, wired as the supervisor wires an API process. */
  async function backend(name: string, env: Record<string, string> = {}): Promise<Backend & { child: ChildProcess }> {
    const child = fork(path.join(path.dirname(fileURLToPath(import.meta.url)), 'front-door.backend.mjs'), [], {
      env: { ...process.env, NAME: name, ...env },
      execArgv: [],
    });
    children.push(child);
    const b: Backend & { child: ChildProcess } = {
      name,
      child,
      send: (m, socket, done) => void child.send(m, socket, { keepOpen: true }, (err) => done(err ?? null)),
      tell: () => {},
    };
    child.on('message', (m: { t: string; seq: number }) => m.t === 'took' && door.took(m.seq, b));
    child.on('close', () => door.remove(b, { dead: true }));
    await once(child, 'message'); // ready
    return b;
  }
  afterEach(() => {
    for (const c of children.splice(0)) c.kill('SIGKILL');
    return door?.close();
  });
  const open = async (holdMs: number, maxHeld = 100, ackMs = 5000) => {
    door = new FrontDoor({ holdMs, maxHeld, ackMs, log: createLogger('silent'), registry: new Registry() });
    port = await door.listen(0);
  };
  it('when two API processes are ready, then new connections alternate between them', async () => {
    await open(1000);
    const a = await backend('a');
    const b = await backend('b');
    door.add(a);
    door.add(b);
    const by = [];
    for (let i = 0; i < 4; i++) by.push((await get(port)).body.servedBy);
    expect(by).to.deep.equal(['a', 'b', 'a', 'b']);
  });

  it('when no API process is ready, then a connection waits and is served as soon as one is', async () => {
    await open(5000);
    const pending = get(port);
    await new Promise((r) => setTimeout(r, 300));
    const a = await backend('a');
    door.add(a);
    const r = await pending;
    expect(r.status).to.equal(200);
    expect(r.body.servedBy).to.equal('a');
    expect(r.ms).to.be.at.least(250);
  });

  it('when the only API process goes away, then the next connection waits for its replacement', async () => {
    await open(5000);
    const a = await backend('a');
    door.add(a);
    expect((await get(port)).body.servedBy).to.equal('a');
    door.remove(a);
    const pending = get(port);
    setTimeout(() => void backend('a2').then((b) => door.add(b)), 200);
    expect((await pending).body.servedBy).to.equal('a2');
  });

  it('when no API process is ready within the hold time, then 503 service_unavailable in the Error shape with Retry-After, not a refused connection', async () => {
    await open(200);
    const r = await get(port);
    expect(r.status).to.equal(503);
    expect(r.headers['retry-after']).to.equal('5');
    expect(r.body.error.code).to.equal('service_unavailable');
    expect(r.body.error.requestId).to.match(/^req_/);
    expect(r.ms).to.be.at.least(150);
  });

  it('when too many connections already wait, then the next one gets 503 at once', async () => {
    await open(2000, 1);
    const first = get(port);
    await new Promise((r) => setTimeout(r, 50));
    const second = await get(port);
    expect(second.status).to.equal(503);
    expect(second.ms).to.be.below(1500);
    door.add(await backend('a'));
    expect((await first).status).to.equal(200);
  });

  it('when handing a connection over fails, then it goes to the next ready API process', async () => {
    await open(1000);
    const broken: Backend = {
      name: 'broken',
      send: (_m, _s, done) => done(new Error('channel closed')),
      tell: () => {},
    };
    const a = await backend('a');
    door.add(broken);
    door.add(a);
    for (let i = 0; i < 3; i++) expect((await get(port)).body.servedBy).to.equal('a');
  });

  it('when an API process dies after a connection was sent to it but before it took it, then the connection goes to the next process instead of hanging', async () => {
    await open(5000);
    // Frozen (SIGSTOP): the connection waits unread in its IPC channel, as for a process that
    // dies at that moment; then it dies.
    const dying = await backend('dying');
    process.kill(dying.child.pid!, 'SIGSTOP');
    door.add(dying);
    const pending = get(port);
    await new Promise((r) => setTimeout(r, 200));
    door.add(await backend('a'));
    dying.child.kill('SIGKILL'); // its 'close': remove(…, { dead: true })
    const r = await pending;
    expect(r.status).to.equal(200);
    expect(r.body.servedBy).to.equal('a');
  });

  it('when an API process stops acknowledging connections (wedged), then new connections go to the others, and it is back in turn once it acknowledges again', async () => {
    await open(5000, 100, 300);
    const slow = await backend('slow');
    door.add(slow);
    process.kill(slow.child.pid!, 'SIGSTOP');
    const first = get(port); // sent to the frozen process, unacknowledged
    await new Promise((r) => setTimeout(r, 500)); // past ackMs: skipped from now on
    door.add(await backend('a'));
    for (let i = 0; i < 3; i++) expect((await get(port)).body.servedBy).to.equal('a');
    process.kill(slow.child.pid!, 'SIGCONT');
    expect((await first).body.servedBy).to.equal('slow'); // it had it: it keeps it
    const by = new Set<string>();
    for (let i = 0; i < 4; i++) by.add((await get(port)).body.servedBy);
    expect([...by].sort()).to.deep.equal(['a', 'slow']);
  });
});
