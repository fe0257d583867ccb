import { MongoBulkWriteError } from 'mongodb';
import { z } from 'zod';
import { broker } from '../../contracts/registry';
import { metrics } from '../../monitoring/metrics';
import type { AmqpClient, Delivery } from '../infra/amqp';
import { type DatabaseHealth, isDatabaseUnavailable } from '../infra/db-health';
import { parseOrDeadLetter } from '../infra/message';
import type { Logger } from '../infra/log';
import { toUnits } from '../credits/credits';
import type { AuditDoc, Store } from '../infra/mongo';
import { insertAuditEntries } from './audit.repository';

/** An audit entry as published (JSON: `at` travels as an ISO string). Unknown fields are dropped. */
const AuditMessage = z
  .object({
    _id: z.string().min(1),
    at: z.coerce.date(),
    accountId: z.string(),
    keyId: z.string(),
    method: z.string(),
    route: z.string(),
    status: z.number().int(),
    durationMs: z.number(),
    millicreditsCharged: z.number().int().optional(),
    /** Decimal credits, as published before millicredits: such an entry still queued is converted. */
    creditsCharged: z.number().optional(),
    requestId: z.string(),
  })
  .transform(({ creditsCharged, millicreditsCharged, ...m }) => ({
    ...m,
    millicreditsCharged: millicreditsCharged ?? toUnits(creditsCharged ?? 0),
  }));

const AuditMessages = z.union([AuditMessage, z.array(AuditMessage).min(1).max(10_000)]);

export interface AuditWriterOptions {
  store: Store;
  /** Whether the database answers (Runtime dbHealth). */
  health: DatabaseHealth;
  amqp: AmqpClient;
  log: Logger;
  /** QUEUE_PREFIX of the deployment. */
  prefix: string;
  /** Entries per insertMany at most. Default 200. */
  batchSize?: number;
  /** How long the first entry of a batch waits for more, in ms. Default 50. */
  flushMs?: number;
  /** Unacked entries this process holds at most (RabbitMQ prefetch). Default 500. */
  prefetch?: number;
  /** Longest wait between two tries of a failed write, in ms. Default 5000. */
  maxBackoffMs?: number;
}

interface Held {
  entries: AuditDoc[];
  d: Delivery;
}

/**
 * The audit queue's consumer, run by every API process: collects entries and writes them with
 * one `insertMany` (unordered) per batch of up to `batchSize` entries or `flushMs` ms, then acks
 * them. A redelivered entry (its process died after the write, before the ack) is a duplicate
 * `_id` and is ignored. A document the server refuses for itself (any other per-document write
 * error) and a message that is not an entry are dead-lettered (parked by the scheduler).
 * When the write fails as a whole the batch is held, unacked, and written again after a backoff
 * (0.1 s doubling to `maxBackoffMs`; while the database is known to be away, as soon as it is
 * back: platform/infra/db-health.ts) rather than requeued: requeues count towards
 * the quorum delivery limit and would dead-letter good entries during a long outage.
 * `stop()` cancels the consumer and writes what it holds; what it cannot write goes back to the
 * queue. It may be called twice.
 */
export function createAuditWriter(o: AuditWriterOptions) {
  const { store, health, amqp, log } = o;
  const queue = broker.auditQueue(o.prefix);
  const batchSize = o.batchSize ?? 200;
  const flushMs = o.flushMs ?? 50;
  const maxBackoffMs = o.maxBackoffMs ?? 5000;
  let pending: Held[] = [];
  let pendingEntries = 0;
  let timer: NodeJS.Timeout | undefined;
  const writing = new Set<Promise<void>>();
  const wakers = new Set<() => void>();
  let cancel: (() => Promise<void>) | undefined;
  let stopping = false;
  let stopped: Promise<void> | undefined;

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(t);
        wakers.delete(wake);
        resolve();
      };
      const t = setTimeout(wake, ms);
      wakers.add(wake);
    });

  /** Write one batch until it is written, or give it back to the queue when stopping. */
  const write = async (batch: Held[]): Promise<void> => {
    for (let attempt = 0; ; attempt++) {
      const docs = batch.flatMap((h) => h.entries);
      // The database is known to be away: no write to try until it is back (or stop).
      if (!health.up && !stopping) await Promise.race([health.whenUp(), sleep(60_000)]);
      try {
        await insertAuditEntries(store, docs);
        metrics.auditEntriesWritten.inc(docs.length);
        for (const h of batch) h.d.ack();
        return;
      } catch (err) {
        if (err instanceof MongoBulkWriteError && !err.writeConcernError) {
          const raw = err.writeErrors as unknown;
          const errors = (raw == null ? [] : Array.isArray(raw) ? raw : [raw]) as {
            index: number;
            code: number;
            errmsg?: string;
          }[];
          const refused = new Set(errors.filter((e) => e.code !== 11000).map((e) => e.index));
          if (errors.length) {
            metrics.auditEntriesWritten.inc(err.result.insertedCount);
            // A message with a refused entry is parked whole (its other entries are stored).
            let first = 0;
            for (const h of batch) {
              const bad = h.entries.findIndex((_, j) => refused.has(first + j));
              if (bad < 0) h.d.ack();
              else {
                log.error('audit entry refused by the database; its message is dead-lettered', {
                  requestId: h.entries[bad]!.requestId,
                  err: errors.find((e) => e.index === first + bad)?.errmsg,
                });
                h.d.deadLetter();
              }
              first += h.entries.length;
            }
            return;
          }
        }
        if (stopping) {
          log.warn('audit batch not written at stop; back to the queue', { entries: batch.length, err: err as Error });
          for (const h of batch) h.d.requeue();
          return;
        }
        const delay = Math.min(maxBackoffMs, 100 * 2 ** attempt);
        // While the database is known to be away: said once, then written as soon as it is back.
        const away = isDatabaseUnavailable(err) && !health.up;
        if (attempt === 0 || !away)
          log.warn('audit batch write failed; trying again', {
            entries: batch.length,
            delayMs: away ? 'when the database is back' : delay,
            err: err as Error,
          });
        await (away ? Promise.race([health.whenUp(), sleep(60_000)]) : sleep(delay));
      }
    }
  };

  const flush = () => {
    clearTimeout(timer);
    timer = undefined;
    while (pending.length) {
      // Whole messages, about batchSize entries at a time.
      let n = 0;
      let k = 0;
      while (k < pending.length && (k === 0 || n + pending[k]!.entries.length <= batchSize))
        n += pending[k++]!.entries.length;
      const batch = pending.slice(0, k);
      pending = pending.slice(k);
      pendingEntries -= n;
      const p = write(batch).finally(() => writing.delete(p));
      writing.add(p);
    }
  };

  const onDelivery = async (d: Delivery) => {
    // One entry, or a group of them (the recorder's group commit).
    const parsed = parseOrDeadLetter(d, AuditMessages, { queue: 'audit', log });
    if (!parsed) return;
    const entries: AuditDoc[] = Array.isArray(parsed) ? parsed : [parsed];
    pending.push({ entries, d });
    pendingEntries += entries.length;
    if (pendingEntries >= batchSize || stopping) flush();
    else timer ??= setTimeout(flush, flushMs);
  };

  return {
    async start(): Promise<void> {
      cancel = await amqp.consume(queue, o.prefetch ?? 500, onDelivery);
    },
    stop(): Promise<void> {
      stopped ??= (async () => {
        stopping = true;
        await cancel?.();
        flush();
        for (const wake of [...wakers]) wake(); // one last try for batches waiting to retry
        while (writing.size) await Promise.allSettled([...writing]);
      })();
      return stopped;
    },
  };
}
