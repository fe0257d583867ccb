import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { broker } from '../../contracts/registry';
import { type AmqpClient, RpcTimeoutError } from '../../platform/infra/amqp';
import { useAmqpPair } from '../helpers/amqp-pair';

/** The streamed request/reply of AmqpClient (rpcStream / respond's meta.send), with the real broker. */
describe('platform: AmqpClient streamed replies (rpcStream)', () => {
  const prefix = `srpc${randomBytes(3).toString('hex')}.`;
  let caller: AmqpClient;
  let worker: AmqpClient;
  const queue = broker.poolQueue(prefix, 'speech');
  const pair = useAmqpPair(prefix, 'classic');
  before(() => ({ caller, worker } = pair));

  it('when a responder sends chunks then answers, then the caller gets every chunk in order, each before the answer, and concurrent streams do not mix', async () => {
    const stop = await worker.respond(queue, 4, async (payload, meta) => {
      const { tag, n } = payload as { tag: string; n: number };
      for (let i = 0; i < n; i++) await meta.send(Buffer.from(`${tag}${i};`));
      return { ok: true, result: { tag, sent: n } };
    });
    try {
      const one = async (tag: string, n: number) => {
        const got: string[] = [];
        const reply = await caller.rpcStream<{ tag: string; sent: number }>('speech', { tag, n }, 5000, (data, seq) =>
          got.push(`${seq}:${data.toString()}`),
        );
        return { reply, got };
      };
      const [a, b] = await Promise.all([one('a', 50), one('b', 30)]);
      expect(a.reply).to.deep.equal({ ok: true, result: { tag: 'a', sent: 50 } });
      expect(a.got).to.deep.equal(Array.from({ length: 50 }, (_, i) => `${i}:a${i};`));
      expect(b.got).to.deep.equal(Array.from({ length: 30 }, (_, i) => `${i}:b${i};`));
      // A single-answer caller of the same responder gets the answer alone.
      expect(await caller.rpc('speech', { tag: 'c', n: 3 }, 5000)).to.deep.equal({
        ok: true,
        result: { tag: 'c', sent: 3 },
      });
    } finally {
      await stop();
    }
  });

  it('when a responder fails after some chunks, then the caller has those chunks and the error', async () => {
    const stop = await worker.respond(queue, 1, async (_p, meta) => {
      await meta.send(Buffer.from('x'));
      await meta.send(Buffer.from('y'));
      return { ok: false, error: { code: 'service_unavailable', message: 'engine died' } };
    });
    try {
      const got: string[] = [];
      const reply = await caller.rpcStream('speech', {}, 5000, (d) => got.push(d.toString()));
      expect(got).to.deep.equal(['x', 'y']);
      expect(reply).to.deep.equal({ ok: false, error: { code: 'service_unavailable', message: 'engine died' } });
    } finally {
      await stop();
    }
  });

  it('when the caller aborts while the reply channel is still opening, then the call rejects at once (the abort is not lost)', async () => {
    const fresh = pair.another(); // its reply channel opens on the first call
    await fresh.start();
    try {
      const ac = new AbortController();
      const t0 = performance.now();
      const call = fresh.rpcStream('speech', {}, 3000, () => {}, { signal: ac.signal }).catch((e: unknown) => e);
      ac.abort(new Error('gone while opening'));
      const err = (await call) as Error;
      expect(err.message).to.equal('gone while opening');
      expect(performance.now() - t0).to.be.below(1000);
    } finally {
      await fresh.close();
    }
  });

  it('when the stream does not finish before the deadline, then RpcTimeoutError after the chunks that came; when the caller aborts, then it stops at once', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const stop = await worker.respond(queue, 2, async (_p, meta) => {
      await meta.send(Buffer.from('early'));
      await held;
      return { ok: true, result: 'late' };
    });
    try {
      const got: string[] = [];
      const err = await caller.rpcStream('speech', {}, 300, (d) => got.push(d.toString())).catch((e: unknown) => e);
      expect(err).to.be.instanceOf(RpcTimeoutError);
      expect(got).to.deep.equal(['early']);

      const ac = new AbortController();
      const aborted = caller
        .rpcStream('speech', {}, 5000, () => ac.abort(new Error('client left')), { signal: ac.signal })
        .catch((e: unknown) => e);
      expect(((await aborted) as Error).message).to.equal('client left');
      release();
      // Late chunks and answers of abandoned calls disturb nothing.
      await stop();
      const fresh = await worker.respond(queue, 1, async () => ({ ok: true, result: 'fresh' }));
      try {
        expect(await caller.rpc('speech', {}, 5000)).to.deep.equal({ ok: true, result: 'fresh' });
      } finally {
        await fresh();
      }
    } finally {
      release();
      await stop();
    }
  });
});
