import { z } from 'zod';
import type { JobEnvelope } from '../../contracts/common';
import { metrics } from '../../monitoring/metrics';

/** What every process that moves a job announces on the job-changes fanout (contracts/registry.ts). */
export const JobChangeSchema = z.object({ jobId: z.string() });
export type JobChange = z.infer<typeof JobChangeSchema>;

export interface JobCacheOptions {
  /** Most in-flight jobs kept (least recently stored dropped first); 0 turns that tier off. */
  maxEntries: number;
  /** Backstop: an in-flight entry is read again after this long, whatever was announced. */
  ttlMs: number;
  /** Bytes of finished jobs kept (least recently used dropped first); 0 turns that tier off. */
  finishedMaxBytes?: number;
}

/** A cached job: its owner (checked on every hit) and the envelope GET /jobs/{id} answers. */
export interface CachedJob {
  accountId: string;
  envelope: JobEnvelope;
}

const CACHED_STATUSES = new Set(['queued', 'processing']);
const FINISHED_STATUSES = new Set(['complete', 'failed']);
/** Map entry, ids and object overhead per finished entry, on top of its JSON length. */
const ENTRY_OVERHEAD_BYTES = 256;
/** What a finished entry costs: its JSON length in UTF-16 code units (bytes for ASCII text) plus overhead. */
const sizeOf = (value: CachedJob) =>
  JSON.stringify(value.envelope).length + value.accountId.length + ENTRY_OVERHEAD_BYTES;

/**
 * Jobs still in flight, cached in each API process for `GET /jobs/{id}`: pollers ask for the same
 * queued or processing job again and again, and each ask would otherwise be a database read.
 *
 * Every write that changes what the envelope shows goes through platform/jobs/ (the state machine
 * in jobs.repository.ts), which announces the job on a RabbitMQ fanout after the database
 * acknowledged the write (and, for a finished job, before its event is published); each API process
 * drops the entry when the announcement arrives, within a millisecond or two. A read that was in
 * flight when its job was announced (or the whole cache dropped) is not stored, so a slow read
 * cannot put back a state that was just replaced; announcements of other jobs do not stop it. While
 * the fanout is down (broker away, channel lost) the cache is emptied and not used, since an
 * announcement may have been missed; it is used again once the subscription is re-established.
 * `ttlMs` bounds staleness if a worker's announcement itself failed (its broker connection dropped
 * after its database write).
 *
 * Finished jobs (`complete`, `failed`) have a tier of their own. A finished job never changes
 * again (platform/jobs/jobs.repository.ts moves a job only out of `queued` or `processing`; a space job's preview
 * result shows while it is `processing`, and its final result with `complete`; nothing deletes a
 * finished job), so that tier needs no announcement and no expiry: it is bounded by bytes
 * (`finishedMaxBytes`, least recently used dropped first, results can be large), kept while the
 * fanout is down, and still dropped per job by `invalidate`, so a future path that deletes jobs
 * only has to announce them.
 */
export function createJobCache(opts: JobCacheOptions) {
  const entries = new Map<string, { value: CachedJob; until: number }>();
  /** Finished jobs, least recently used first, and their bytes (sizeOf). */
  const finished = new Map<string, { value: CachedJob; bytes: number }>();
  const finishedMax = opts.finishedMaxBytes ?? 0;
  let finishedBytes = 0;
  const dropFinished = (id: string) => {
    const e = finished.get(id);
    if (!e) return;
    finished.delete(id);
    finishedBytes -= e.bytes;
  };
  const keepFinished = (id: string, value: CachedJob) => {
    const bytes = sizeOf(value);
    if (bytes > finishedMax) return; // larger than the whole tier: never evict everything for one
    dropFinished(id);
    finished.set(id, { value, bytes });
    finishedBytes += bytes;
    while (finishedBytes > finishedMax) {
      dropFinished(finished.keys().next().value!);
      metrics.jobCacheFinishedEvictions.inc();
    }
    metrics.jobCacheFinishedBytes.set(finishedBytes);
  };
  /** Reads in flight per job id, and how often each such job changed meanwhile. */
  const reading = new Map<string, { readers: number; changes: number }>();
  /** Bumped when the whole cache is dropped (fanout lost or back): every read in flight is stale. */
  let epoch = 0;
  let live = false;

  return {
    /**
     * The job `id` of `accountId` as its envelope, or null when it is not theirs or does not
     * exist; `read` fetches it from the database on a miss.
     */
    async get(accountId: string, id: string, read: () => Promise<CachedJob | null>): Promise<JobEnvelope | null> {
      const done = finished.get(id);
      if (done) {
        metrics.jobCacheLookups.inc({ outcome: 'finished_hit' });
        finished.delete(id); // most recently used goes last
        finished.set(id, done);
        return done.value.accountId === accountId ? done.value.envelope : null;
      }
      const hit = live ? entries.get(id) : undefined;
      if (hit && hit.until > Date.now()) {
        metrics.jobCacheLookups.inc({ outcome: 'hit' });
        return hit.value.accountId === accountId ? hit.value.envelope : null;
      }
      metrics.jobCacheLookups.inc({ outcome: 'miss' });
      const startedEpoch = epoch;
      const track = reading.get(id) ?? { readers: 0, changes: 0 };
      reading.set(id, track);
      track.readers++;
      const changesBefore = track.changes;
      let value: CachedJob | null;
      try {
        value = await read();
      } finally {
        if (--track.readers === 0) reading.delete(id);
      }
      // Kept only if neither this job nor the whole cache changed while the read was on its way.
      const unchanged = startedEpoch === epoch && track.changes === changesBefore;
      // A finished job never changes: what was read is final, whatever happened meanwhile.
      if (value && finishedMax > 0 && FINISHED_STATUSES.has(value.envelope.status)) {
        entries.delete(id);
        keepFinished(id, value);
      } else if (value && live && unchanged && opts.maxEntries > 0 && CACHED_STATUSES.has(value.envelope.status)) {
        entries.delete(id);
        entries.set(id, { value, until: Date.now() + opts.ttlMs });
        if (entries.size > opts.maxEntries) entries.delete(entries.keys().next().value!);
      }
      return value && value.accountId === accountId ? value.envelope : null;
    },

    /** A job changed (announced on the fanout, or by this process). */
    invalidate(change: JobChange) {
      entries.delete(change.jobId);
      if (finished.has(change.jobId)) {
        dropFinished(change.jobId);
        metrics.jobCacheFinishedBytes.set(finishedBytes);
      }
      const track = reading.get(change.jobId);
      if (track) track.changes++;
    },

    /**
     * Forget every in-flight job (an unreadable announcement: it may have named any job). Finished
     * jobs stay: no announcement can change them.
     */
    clear() {
      epoch++;
      entries.clear();
    },

    /** The fanout is (again) delivering: caching is safe. */
    ready() {
      epoch++;
      entries.clear();
      live = true;
    },

    /** The fanout was interrupted: forget everything and stop caching until `ready`. */
    lost() {
      epoch++;
      live = false;
      entries.clear();
    },

    get size() {
      return entries.size;
    },

    /** Finished jobs held, and their bytes as counted against `finishedMaxBytes`. */
    get finished() {
      return { entries: finished.size, bytes: finishedBytes };
    },
  };
}
export type JobCache = ReturnType<typeof createJobCache>;
