import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { broker } from '../../contracts/registry';
import { useAmqpPair } from '../helpers/amqp-pair';
import { type AmqpClient, RpcTimeoutError } from '../../platform/infra/amqp';
import { gate } from '../video/helpers';

describe('platform: AmqpClient request/reply (direct reply-to)', () => {
  const prefix = `rpc${randomBytes(3).toString('hex')}.`;
  let caller: AmqpClient;
  let worker: AmqpClient;
  const pair = useAmqpPair(prefix, 'quorum');
  before(() => ({ caller, worker } = pair));

  it('when requests are answered late, out of order or not at all, then each caller gets its own answer or a timeout, and both sides keep working', async () => {
    const release = gate();
    const seen: unknown[] = [];
    const stop = await worker.respond(broker.poolQueue(prefix, 'image'), 4, async (payload) => {
      seen.push(payload);
      const p = payload as { n: number; slow?: boolean };
      if (p.slow) await release.opened;
      return { ok: true, result: { doubled: p.n * 2 } };
    });
    try {
      // A slow request times out on the caller; its late answer must not disturb anything.
      const slow = caller.rpc('image', { n: 1, slow: true }, 200);
      const err = await slow.catch((e: unknown) => e);
      expect(err).to.be.instanceOf(RpcTimeoutError);
      release.open();
      // Concurrent requests: each gets its own answer.
      const answers = await Promise.all([2, 3, 4, 5].map((n) => caller.rpc<{ doubled: number }>('image', { n }, 5000)));
      expect(answers.map((a) => (a.ok ? a.result.doubled : null))).to.deep.equal([4, 6, 8, 10]);
      // The worker still publishes normally after answering a caller that was gone.
      await worker.publish('', broker.deadLetterQueue(prefix), { ping: true });
      expect(seen).to.have.length(5);
    } finally {
      await stop();
    }
  });

  it('when a handler answers with an error, then the caller receives the error code and message', async () => {
    const stop = await worker.respond(broker.poolQueue(prefix, 'image'), 1, async () => ({
      ok: false,
      error: { code: 'adult_render', message: 'no' },
    }));
    try {
      const r = await caller.rpc('image', { n: 1 }, 5000);
      expect(r).to.deep.equal({ ok: false, error: { code: 'adult_render', message: 'no' } });
    } finally {
      await stop();
    }
  });

  it('when a poison message reaches the pool queue (no reply-to), then it is dead-lettered and the responder keeps serving', async () => {
    const calls: unknown[] = [];
    const stop = await worker.respond(broker.poolQueue(prefix, 'image'), 1, async (p) => {
      calls.push(p);
      return { ok: true, result: 'fine' };
    });
    try {
      const deadLettered = new Promise<void>((r) => worker.once('deadLetter', () => r()));
      await caller.publishToPool('image', { not: 'a request' });
      await deadLettered;
      expect(calls).to.have.length(0);
      const next = await caller.rpc('image', { n: 1 }, 5000);
      expect(next).to.deep.equal({ ok: true, result: 'fine' });
      expect(calls).to.deep.equal([{ n: 1 }]);
    } finally {
      await stop();
    }
  });

  it('when the deadline of a request passes before any worker takes it, then the worker acks it without running it', async () => {
    const err = await caller.rpc('image', { n: 9, stale: true }, 150).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(RpcTimeoutError);
    const seen: unknown[] = [];
    const stop = await worker.respond(broker.poolQueue(prefix, 'image'), 1, async (p) => {
      seen.push(p);
      return { ok: true, result: null };
    });
    try {
      const fresh = await caller.rpc('image', { n: 10 }, 5000);
      expect(fresh.ok).to.equal(true);
      expect(seen).to.deep.equal([{ n: 10 }]);
    } finally {
      await stop();
    }
  });
});
