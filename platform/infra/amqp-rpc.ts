import type { Channel, ConsumeMessage } from 'amqplib';
import { broker, type PoolType } from '../../contracts/registry';
import type { ConsumerRegistry } from './amqp-consumers';
import { type AmqpLink, INTERNAL_ERROR, RPC_REPLY_TO } from './amqp-link';
import type { ConfirmPublisher } from './amqp-publisher';
import type { PublishChannels } from './amqp-publish-channels';
import { contextHeaders, producerSpan } from './amqp-spans';
import { deadLetter } from './message';
import { endSpan, tracingOn } from './tracing';

/** The caller channel a direct reply-to address names (`amq.rabbitmq.reply-to.<channel>.<key>`), or ''. */
const replyChannelOf = (replyTo: string) =>
  replyTo.startsWith(`${RPC_REPLY_TO}.`) ? (replyTo.slice(RPC_REPLY_TO.length + 1).split('.')[0] ?? '') : '';

/** The AMQP `type` of a streamed reply's chunk (bytes, header `x-seq` from 0); the final reply has none. */
export const RPC_CHUNK_TYPE = 'rpc.chunk';

export interface RespondMeta {
  deadline: number | null;
  redelivered: boolean;
  /** Stream a chunk of bytes to the caller ahead of the answer (`rpcStream`); resolves on the broker's confirm. */
  send(data: Buffer): Promise<void>;
}

interface PendingRpc {
  resolve(r: RpcReply): void;
  reject(e: Error): void;
  timer: NodeJS.Timeout;
  channel: Channel;
  /** Set for `rpcStream`: where chunks go and how many came. */
  stream?: { onChunk: (data: Buffer, seq: number) => void; received: number };
  /** Removes the abort listener. */
  unlink?: () => void;
}

/** What a responder answers: a result, or an error with a stable AppError code. */
export type RpcReply<T = unknown> = { ok: true; result: T } | { ok: false; error: { code: string; message: string } };

/** No answer within the deadline. */
export class RpcTimeoutError extends Error {
  override name = 'RpcTimeoutError';
}

/** One message on the reply channel: a chunk of a streamed reply, or the final reply of request `p`. */
function deliverReply(pending: Map<string, PendingRpc>, msg: ConsumeMessage) {
  const id = msg.properties.correlationId as string;
  const p = pending.get(id);
  if (!p) return; // late answer to a request that already timed out
  const finish = (outcome: { reply: RpcReply } | { err: Error }) => {
    clearTimeout(p.timer);
    p.unlink?.();
    pending.delete(id);
    'reply' in outcome ? p.resolve(outcome.reply) : p.reject(outcome.err);
  };
  if (msg.properties.type === RPC_CHUNK_TYPE) {
    if (!p.stream) return; // a single-answer caller never asked for chunks
    // One publisher, one channel, one consumer: chunks arrive in order or not at all,
    // but a chunk the responder sent again after a failover may arrive twice.
    const seq = Number(msg.properties.headers?.['x-seq']);
    if (seq < p.stream.received) return;
    if (seq !== p.stream.received)
      return finish({
        err: new Error(`streamed reply chunk ${seq} arrived when ${p.stream.received} was due`),
      });
    p.stream.received++;
    try {
      p.stream.onChunk(msg.content, seq);
    } catch (err) {
      finish({ err: err as Error });
    }
    return;
  }
  let reply: RpcReply;
  try {
    reply = JSON.parse(msg.content.toString('utf8')) as RpcReply;
  } catch (err) {
    return finish({ err: new Error(`malformed reply: ${(err as Error).message}`) });
  }
  const sent = Number(msg.properties.headers?.['x-chunks'] ?? 0);
  if (p.stream && sent !== p.stream.received)
    return finish({ err: new Error(`streamed reply ended after ${p.stream.received} of ${sent} chunks`) });
  finish({ reply });
}

/** The caller side of request/reply over RabbitMQ direct reply-to: one reply channel, the requests awaiting their answer. */
export class RpcCaller {
  private channel?: Channel;
  private opening?: Promise<Channel>;
  private pending = new Map<string, PendingRpc>();
  private seq = 0;

  constructor(
    private readonly link: AmqpLink,
    private readonly channels: PublishChannels,
  ) {}

  /** The channel that publishes requests and consumes `amq.rabbitmq.reply-to` (both must be one channel). */
  private async replyChannel(): Promise<Channel> {
    if (this.channel) return this.channel;
    this.opening ??= (async () => {
      await this.channels.ready(this.link.publishTimeoutMs);
      if (!this.link.conn) throw new Error('amqp not connected');
      const ch = await this.link.conn.createChannel();
      ch.on('error', (err) => this.link.log.warn('amqp reply channel error', { err }));
      ch.on('close', () => {
        if (this.channel === ch) this.channel = undefined;
        // Replies are bound to the channel: requests sent on it can no longer be answered.
        for (const [id, p] of this.pending) {
          if (p.channel !== ch) continue;
          clearTimeout(p.timer);
          p.unlink?.();
          this.pending.delete(id);
          p.reject(new Error('the reply channel closed before the answer came'));
        }
      });
      await ch.consume(
        RPC_REPLY_TO,
        (msg) => {
          if (msg) deliverReply(this.pending, msg);
        },
        { noAck: true },
      );
      this.channel = ch;
      return ch;
    })().finally(() => {
      this.opening = undefined;
    });
    return this.opening;
  }

  /**
   * Unlike a publish, a request is never sent again after a failover. Its answer is addressed to
   * the reply channel of the connection that died, so only a new request (new correlation id)
   * could be answered; but the first may already be running on a worker (it only expires at its
   * deadline), so sending again could run the work twice for a caller that is about to time out.
   * The call fails at once instead ('the reply channel closed before the answer came': the API
   * answers 503 and the client retries), as it does while the broker is away.
   */
  async request<T>(
    pool: PoolType,
    payload: unknown,
    timeoutMs: number,
    stream?: { onChunk: (data: Buffer, seq: number) => void; signal?: AbortSignal },
  ): Promise<RpcReply<T>> {
    stream?.signal?.throwIfAborted();
    const ch = await this.replyChannel();
    // The abort listener is added below; an abort while the channel opened would be lost.
    stream?.signal?.throwIfAborted();
    const correlationId = `${process.pid}.${Date.now().toString(36)}.${(this.seq++).toString(36)}`;
    const deadline = Date.now() + timeoutMs;
    const answer = new Promise<RpcReply<T>>((resolve, reject) => {
      // Give up only once the wall clock is past the deadline the responder checks (timers can
      // fire a little early), so a request the caller abandoned is always stale to a worker.
      const expire = () => {
        const left = deadline - Date.now();
        const p = this.pending.get(correlationId);
        if (left >= 0) {
          if (p) p.timer = setTimeout(expire, left + 1);
          return;
        }
        p?.unlink?.();
        this.pending.delete(correlationId);
        reject(
          new RpcTimeoutError(`no ${stream ? 'complete ' : ''}answer from the ${pool} pool within ${timeoutMs} ms`),
        );
      };
      const timer = setTimeout(expire, timeoutMs);
      const pending: PendingRpc = { resolve: resolve as (r: RpcReply) => void, reject, timer, channel: ch };
      if (stream) {
        pending.stream = { onChunk: stream.onChunk, received: 0 };
        const signal = stream.signal;
        if (signal) {
          const onAbort = () => {
            const p = this.pending.get(correlationId);
            if (!p) return;
            clearTimeout(p.timer);
            this.pending.delete(correlationId);
            reject(signal.reason instanceof Error ? signal.reason : new Error('the caller gave up'));
          };
          signal.addEventListener('abort', onAbort, { once: true });
          pending.unlink = () => signal.removeEventListener('abort', onAbort);
        }
      }
      this.pending.set(correlationId, pending);
    });
    const content = Buffer.from(JSON.stringify(payload));
    // A request is not confirmed: its producer span ends once it is written.
    const span = tracingOn
      ? producerSpan('', broker.poolQueue(this.link.topology.prefix, pool), {}, content.length)
      : undefined;
    try {
      ch.publish('', broker.poolQueue(this.link.topology.prefix, pool), content, {
        correlationId,
        replyTo: RPC_REPLY_TO,
        persistent: false,
        contentType: 'application/json',
        headers: contextHeaders({ 'x-deadline': deadline }, span),
      });
      endSpan(span);
    } catch (err) {
      endSpan(span, err);
      const p = this.pending.get(correlationId);
      if (p) {
        clearTimeout(p.timer);
        p.unlink?.();
        this.pending.delete(correlationId);
      }
      throw err;
    }
    this.link.events.emit('published', { exchange: '', routingKey: broker.poolQueue(this.link.topology.prefix, pool) });
    return answer;
  }
}

/** The worker side of request/reply: answers the requests of a pool queue. */
export class RpcResponder {
  /** Reply-to channels of callers whose node is down (see callerGone). */
  private goneCallers = new Set<string>();

  constructor(
    private readonly link: AmqpLink,
    private readonly consumers: ConsumerRegistry,
    private readonly publisher: ConfirmPublisher,
  ) {}

  /** AmqpClient.respond: the requests of `queue` to `handler`, each answered to its reply-to, then acked. */
  respond(
    queue: string,
    prefetch: number,
    handler: (payload: unknown, meta: RespondMeta) => Promise<RpcReply>,
  ): Promise<() => Promise<void>> {
    return this.consumers.consume(queue, prefetch, async (d) => {
      const { replyTo, correlationId, headers } = d.msg.properties;
      // Nobody could read its answer: dead-lettered, and said (a publisher that is not an rpc caller).
      if (!replyTo || !correlationId) return deadLetter(d, 'no_reply_to', { queue, log: this.link.log });
      const deadline = Number(headers?.['x-deadline']) || null;
      if (deadline !== null && Date.now() > deadline) return d.ack();
      if (this.callerGone(replyTo as string)) return d.ack();
      let payload: unknown;
      try {
        payload = JSON.parse(d.msg.content.toString('utf8'));
      } catch {
        payload = undefined;
      }
      let chunks = 0;
      const send = async (data: Buffer) => {
        const seq = chunks++;
        await this.publisher
          .publishContent('', replyTo as string, data, {
            correlationId: correlationId as string,
            persistent: false,
            type: RPC_CHUNK_TYPE,
            contentType: 'application/octet-stream',
            headers: { 'x-seq': seq },
          })
          .catch((err: unknown) => {
            this.markCallerGone(replyTo as string, err);
            throw err;
          });
      };
      const reply: RpcReply =
        payload === undefined
          ? { ok: false, error: { code: 'validation_error', message: 'request is not JSON' } }
          : await handler(payload, { deadline, redelivered: d.msg.fields.redelivered, send });
      // Settled before the answer goes: an answer that cannot be delivered (or that takes the
      // connection down with it, below) must not make the request run again.
      d.ack();
      try {
        await this.publisher.publish('', replyTo as string, reply, {
          correlationId: correlationId as string,
          persistent: false,
          headers: { 'x-chunks': chunks },
        });
      } catch (err) {
        // The caller is gone or the broker is away: the caller times out on its own.
        this.markCallerGone(replyTo as string, err);
        this.link.log.warn('rpc reply not delivered', { queue, err: err as Error });
      }
    });
  }

  /**
   * The reply-to of a request whose caller is known to be unreachable. Measured on RabbitMQ 3.10:
   * publishing to the direct reply-to of a channel whose node is down makes the broker close the
   * publisher's connection (541 INTERNAL_ERROR), so every answer to a caller of a dead node would
   * cost the worker its connection (and redeliver whatever else it holds). After the first such
   * loss, requests with that reply-to (one per caller channel) are acked unanswered: their caller
   * is gone with its node, and a restarted node's channels have new reply-to names.
   */
  private callerGone(replyTo: string): boolean {
    return this.goneCallers.has(replyChannelOf(replyTo));
  }

  private markCallerGone(replyTo: string, err: unknown) {
    if ((err as { code?: unknown })?.code !== INTERNAL_ERROR) return;
    const key = replyChannelOf(replyTo);
    if (!key || this.goneCallers.has(key)) return;
    this.goneCallers.add(key);
    if (this.goneCallers.size > 1000) this.goneCallers.delete(this.goneCallers.values().next().value!);
    this.link.log.warn('rpc caller unreachable (its node is down): its requests are dropped unanswered');
  }
}
