import { createHash } from 'node:crypto';
import type { Request, Response } from 'express';
import type { JobEnvelope } from '../../contracts/common';
import { metrics } from '../../monitoring/metrics';
import { AppError, notFound } from '../../platform/infra/errors';
import { abortWhenClientLeaves } from '../http/client-gone';

/** Why a wait ended: the job was announced, the time ran out, or the client or this process went away. */
export type WakeReason = 'changed' | 'timeout' | 'closed';
type Kind = 'stream' | 'wait';

const FINISHED = new Set(['complete', 'failed']);
/** The longest `Prefer: wait` honoured, in seconds. */
export const MAX_WAIT_S = 60;
/** What an EventSource waits before it reconnects after the stream dropped (the SSE `retry:` field). */
const RECONNECT_MS = 2000;

const tags = new WeakMap<JobEnvelope, string>();
/**
 * The job's ETag, also the `id:` of its events: a digest of the envelope GET /jobs/{id} answers,
 * so it changes exactly when something a client sees changes (two changes within one millisecond
 * share an `updatedAt`, never a digest). Memoized per envelope object: a cached job answers the
 * same object again and again.
 */
export function jobTag(envelope: JobEnvelope): string {
  let tag = tags.get(envelope);
  if (!tag) {
    tag = createHash('sha1').update(JSON.stringify(envelope)).digest('base64url').slice(0, 22);
    tags.set(envelope, tag);
  }
  return tag;
}

/**
 * Clients of this API process waiting for a job to change (GET /jobs/{id}/events streams and
 * `Prefer: wait` reads), woken by the job-changes fanout that already keeps the job cache true
 * (api/app.ts): every process that moves a job announces it there after its database write, so a
 * client on any API process hears of a change made anywhere within a few milliseconds.
 *
 * A waiter registers before it reads the job, so a change between its read and its wait is not
 * missed. While the fanout is down an announcement may be lost: every waiter is woken when the
 * subscription is lost and when it is back (they read again), and streams read again on each
 * heartbeat besides.
 */
export function createJobWatch(opts: { maxWatchers: number }) {
  const waiters = new Map<string, Set<(reason: WakeReason) => void>>();
  const held: Record<Kind, number> = { stream: 0, wait: 0 };
  let closed = false;
  /** Resolves `close()` once the last client was given back. */
  let drained: (() => void) | undefined;
  const wake = (set: Set<(reason: WakeReason) => void> | undefined, reason: WakeReason) => {
    for (const done of [...(set ?? [])]) done(reason);
  };

  return {
    /**
     * A place for one more client of `kind`, given back by the returned function; 503 when this
     * process holds JOB_EVENT_STREAMS_MAX already, or is shutting down.
     */
    admit(kind: Kind): () => void {
      if (closed || held.stream + held.wait >= opts.maxWatchers) {
        throw new AppError(
          'service_unavailable',
          'this API process holds as many job streams and waits as it may (JOB_EVENT_STREAMS_MAX); retry shortly',
          { headers: { 'Retry-After': '1' } },
        );
      }
      held[kind]++;
      metrics.jobWatchers.inc({ kind });
      let given = false;
      return () => {
        if (given) return;
        given = true;
        held[kind]--;
        metrics.jobWatchers.dec({ kind });
        if (closed && held.stream + held.wait === 0) drained?.();
      };
    },

    /** Resolves on the next announcement of `jobId`, after `ms`, or when `signal` aborts or the watch closes. */
    next(jobId: string, ms: number, signal: AbortSignal): Promise<WakeReason> {
      return new Promise((resolve) => {
        if (closed || signal.aborted) return resolve('closed');
        const mine = waiters.get(jobId) ?? new Set();
        waiters.set(jobId, mine);
        const done = (reason: WakeReason) => {
          clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          mine.delete(done);
          if (mine.size === 0 && waiters.get(jobId) === mine) waiters.delete(jobId);
          resolve(reason);
        };
        const onAbort = () => done('closed');
        const timer = setTimeout(() => done('timeout'), ms);
        signal.addEventListener('abort', onAbort, { once: true });
        mine.add(done);
      });
    },

    /** `jobId` was announced on the fanout. */
    changed(jobId: string) {
      wake(waiters.get(jobId), 'changed');
    },

    /** Announcements may have been missed (fanout lost or back, an unreadable one): everyone reads again. */
    changedAll() {
      for (const set of [...waiters.values()]) wake(set, 'changed');
    },

    /** Shutting down: every stream ends (its client resumes on another process with Last-Event-ID), every wait answers now. */
    close(): Promise<void> {
      closed = true;
      for (const set of [...waiters.values()]) wake(set, 'closed');
      if (held.stream + held.wait === 0) return Promise.resolve();
      return new Promise((resolve) => {
        drained = resolve;
      });
    },

    /** Shutting down: answers close their connections, so the process is not kept waiting on idle keep-alives. */
    get closing() {
      return closed;
    },

    /** Clients held, by kind. */
    get held() {
      return { ...held };
    },
  };
}
export type JobWatch = ReturnType<typeof createJobWatch>;

/** Reads the job as its owner sees it; null when it is not theirs or does not exist. */
type ReadJob = () => Promise<JobEnvelope | null>;

/** An `If-None-Match` or `Last-Event-ID` value as a bare tag (quotes and W/ dropped). */
const bareTag = (raw: string | undefined) => raw?.trim().replace(/^W\//, '').replace(/^"|"$/g, '') || undefined;

/** The seconds of an RFC 7240 `Prefer: wait=N` (capped at MAX_WAIT_S); undefined without one. */
export function preferredWait(prefer: string | undefined): number | undefined {
  const m = prefer && /(?:^|[,;]\s*)wait\s*=\s*"?(\d{1,9})"?\s*(?:[,;]|$)/i.exec(prefer);
  if (!m) return undefined; // RFC 7240 §2: a preference not understood is ignored
  const s = Number(m[1]);
  return s > 0 ? Math.min(s, MAX_WAIT_S) : undefined;
}

/**
 * GET /jobs/{id}: the envelope with its ETag; `If-None-Match` naming the current tag answers 304;
 * `Prefer: wait=N` holds the answer until the job differs from what the client has (the tag it
 * names, else the state at arrival) or N seconds passed.
 */
export async function answerJob(
  req: Request,
  res: Response,
  jobId: string,
  read: ReadJob,
  watch: JobWatch,
): Promise<JobEnvelope | undefined> {
  const known = bareTag(req.get('if-none-match'));
  const waitS = preferredWait(req.get('prefer'));
  const reply = (envelope: JobEnvelope) => {
    res.setHeader('ETag', `"${jobTag(envelope)}"`);
    if (watch.closing) res.setHeader('Connection', 'close');
    if (known !== undefined && known === jobTag(envelope)) {
      res.status(304).end();
      return undefined;
    }
    return envelope;
  };
  if (waitS === undefined) {
    const envelope = await read();
    if (!envelope) throw notFound('job');
    return reply(envelope);
  }
  res.setHeader('Preference-Applied', `wait=${waitS}`);
  res.setHeader('Vary', 'Prefer, If-None-Match');
  const ac = new AbortController();
  const stopListening = abortWhenClientLeaves(res, ac);
  const deadline = Date.now() + waitS * 1000;
  let wake = watch.next(jobId, waitS * 1000, ac.signal); // before the read: no change slips between
  let release: (() => void) | undefined;
  try {
    let envelope = await read();
    if (!envelope) throw notFound('job');
    const has = known ?? jobTag(envelope);
    if (FINISHED.has(envelope.status) || has !== jobTag(envelope)) {
      metrics.jobWaits.inc({ outcome: 'immediate' });
      return reply(envelope);
    }
    release = watch.admit('wait');
    for (;;) {
      const reason = await wake;
      const left = deadline - Date.now();
      if (reason === 'changed' && left > 0) wake = watch.next(jobId, left, ac.signal);
      const now = await read();
      if (!now) throw notFound('job');
      envelope = now;
      if (jobTag(envelope) !== has || reason !== 'changed' || left <= 0) {
        metrics.jobWaits.inc({ outcome: jobTag(envelope) !== has ? 'changed' : 'timeout' });
        return reply(envelope);
      }
    }
  } finally {
    ac.abort();
    stopListening();
    release?.();
  }
}

/**
 * GET /jobs/{id}/events: Server-Sent Events of one job. The current state at once (unless
 * `Last-Event-ID` names it), then each change as it is announced, `: heartbeat` comments while
 * nothing happens, and the end of the stream after the `complete` or `failed` event. Every event
 * is the whole envelope (`progress`, `complete` or `failed`, with the ETag as its id), so a client
 * that resumes gets the latest state, not the ones it missed in between. A resume whose
 * Last-Event-ID names the final state answers 204, which tells an EventSource to stop.
 */
export async function streamJob(
  req: Request,
  res: Response,
  jobId: string,
  read: ReadJob,
  watch: JobWatch,
  heartbeatMs: number,
): Promise<void> {
  const ac = new AbortController();
  const stopListening = abortWhenClientLeaves(res, ac);
  let wake = watch.next(jobId, heartbeatMs, ac.signal); // before the read: no change slips between
  let release: (() => void) | undefined;
  try {
    let envelope = await read();
    if (!envelope) throw notFound('job');
    let sent = bareTag(req.get('last-event-id'));
    if (FINISHED.has(envelope.status) && sent === jobTag(envelope)) {
      res.status(204).end();
      return;
    }
    if (ac.signal.aborted) return; // nobody to stream to
    release = watch.admit('stream');
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      'x-accel-buffering': 'no',
    });
    res.write(`retry: ${RECONNECT_MS}\n\n`);
    for (;;) {
      const tag = jobTag(envelope);
      if (tag !== sent) {
        const event = FINISHED.has(envelope.status) ? envelope.status : 'progress';
        res.write(`id: ${tag}\nevent: ${event}\ndata: ${JSON.stringify(envelope)}\n\n`);
        metrics.jobEventsSent.inc({ event });
        sent = tag;
      }
      if (FINISHED.has(envelope.status)) return;
      const reason = await wake;
      if (reason === 'closed') return;
      wake = watch.next(jobId, heartbeatMs, ac.signal);
      // An idle stream is read again on each heartbeat: the backstop for a lost announcement.
      if (reason === 'timeout') res.write(': heartbeat\n\n');
      const now = await read();
      if (!now) return; // deleted with its account: nothing more will come
      envelope = now;
    }
  } finally {
    ac.abort();
    stopListening();
    // Shutting down: the connection closes after the last byte, and its client reconnects elsewhere.
    if (watch.closing) res.once('finish', () => req.socket.end());
    if (res.headersSent && !res.writableEnded) res.end();
    release?.();
  }
}
