import type { Filter } from 'mongodb';
import { z } from 'zod';
import { fromUnits } from '../credits/credits';
import { decodeCursor, encodeCursor, keysetPage, type Page } from '../infra/lists';
import { type ApiKeyDoc, type AuditDoc, type JobDoc, type LedgerDoc, type Store, openStore } from '../infra/mongo';
import { type AccountSlice, accountSlice } from '../infra/tenant';

/** How far back the audit log and its filters reach (SPEC 8: entries are kept 90 days). */
export const AUDIT_DAYS = 90;
/** Days the usage chart shows. */
export const CHART_DAYS = 30;
const DAY_MS = 86_400_000;
const PAGE_SIZE = 50;

const day = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, 'must be a date YYYY-MM-DD')
  .refine((s) => !Number.isNaN(Date.parse(`${s}T00:00:00Z`)), 'must be a real date');
const optional = <T extends z.ZodType>(t: T) => z.preprocess((v) => (v === '' ? undefined : v), t.optional());

/** The audit page's filters, as the form sends them (empty fields mean "any"). */
export const AuditFilterSchema = z.object({
  keyId: optional(z.string().max(100)),
  route: optional(z.string().max(300)),
  status: optional(z.string().regex(/^([1-5]xx|[1-5]\d\d)$/, 'must be a status such as 404 or a class such as 5xx')),
  from: optional(day),
  to: optional(day),
  cursor: optional(z.string().max(500)),
});
export type AuditFilter = z.infer<typeof AuditFilterSchema>;

/** A page of audit entries: no total (counting costs a scan of the account's entries on FerretDB). */
export interface AuditPage {
  data: AuditDoc[];
  cursor: string | null;
}

const AUDIT_TAG = 'console:audit:at:desc';
/** An account's usage per day is reused this long after it was counted (the count streams entries). */
const USAGE_CACHE_MS = 60_000;
const USAGE_CACHE_MAX = 1000;
/**
 * At most this many audit entries and this many ledger entries (each newest first) are read to
 * draw an account's usage chart: past it the chart covers the newest ones and says so.
 */
export const USAGE_SCAN_CAP = 50_000;

/** One bar group of the usage chart: a UTC day. */
export interface DayUsage {
  day: string;
  requests: number;
  credits: number;
}

/** The usage chart's figures and whether a cap cut them short (then they cover the newest `cap` entries). */
export interface Usage {
  days: DayUsage[];
  /** The cap, when the account had more API calls in the period than it: the counts cover the newest `cap` calls. */
  requestsCappedAt: number | null;
  /** The cap, when the account had more ledger entries in the period than it. */
  creditsCappedAt: number | null;
}

export interface ConsoleQueryOptions {
  /** Entries read per source for the usage chart (default USAGE_SCAN_CAP). */
  usageScanCap?: number;
}

/** The audit page's query (the account is added by the slice): the filters, and past the cursor's entry. */
function auditQuery(f: AuditFilter, now: Date): Filter<AuditDoc> {
  const floor = new Date(now.getTime() - AUDIT_DAYS * DAY_MS);
  const from = f.from ? new Date(`${f.from}T00:00:00Z`) : floor;
  const at: { $gte: Date; $lt?: Date } = { $gte: from < floor ? floor : from };
  if (f.to) at.$lt = new Date(Date.parse(`${f.to}T00:00:00Z`) + DAY_MS);
  const filter: Filter<AuditDoc> = { at };
  if (f.keyId) filter.keyId = f.keyId;
  if (f.route) filter.route = f.route;
  if (f.status?.endsWith('xx')) {
    const base = Number(f.status[0]) * 100;
    filter.status = { $gte: base, $lt: base + 100 };
  } else if (f.status) filter.status = Number(f.status);
  if (!f.cursor) return filter;
  // Keyset order (at, _id) like platform/infra/lists.ts, without its count.
  const after = decodeCursor(AUDIT_TAG, f.cursor);
  return {
    $and: [
      filter,
      { $or: [{ at: { $lt: after.value as Date } }, { at: after.value as Date, _id: { $lt: after.id } }] },
    ],
  };
}

/**
 * The console's reads, through `forAccount(accountId)` of the signed-in account: every filter is
 * narrowed to it, so a page can only ever show that account's data.
 */
export function createConsoleQueries(store: Store, opts: ConsoleQueryOptions = {}) {
  const db = openStore(store);
  const cap = opts.usageScanCap ?? USAGE_SCAN_CAP;
  // Per account: the computation in flight (shared by concurrent views), then its result until `until`.
  const usageCache = new Map<string, { until: number; usage: Promise<Usage> }>();

  /** See dailyUsage. */
  const countDays = async (
    audit: AccountSlice<AuditDoc>,
    ledger: AccountSlice<LedgerDoc>,
    now: Date,
  ): Promise<Usage> => {
    const today = Math.floor(now.getTime() / DAY_MS);
    const first = today - CHART_DAYS + 1;
    const days: DayUsage[] = Array.from({ length: CHART_DAYS }, (_, i) => ({
      day: new Date((first + i) * DAY_MS).toISOString().slice(0, 10),
      requests: 0,
      credits: 0,
    }));
    const slot = (at: Date) => days[Math.floor(at.getTime() / DAY_MS) - first];
    const since = new Date(first * DAY_MS);
    // Newest first, one past the cap: reading cap + 1 entries tells that there were more.
    const scan = async <T>(entries: AsyncIterable<T>, count: (x: T) => void): Promise<number | null> => {
      let n = 0;
      for await (const x of entries) {
        if (++n > cap) return cap;
        count(x);
      }
      return null;
    };
    const [requestsCappedAt, creditsCappedAt] = await Promise.all([
      // The console's own entries (sign-in, key changes) are not API calls.
      scan(
        audit
          .find({ at: { $gte: since }, via: { $ne: 'console' } }, { projection: { at: 1 } })
          .sort({ at: -1 })
          .limit(cap + 1),
        (a) => {
          const d = slot(a.at);
          if (d) d.requests++;
        },
      ),
      scan(
        ledger
          .find({ at: { $gte: since } }, { projection: { at: 1, kind: 1, millicredits: 1 } })
          .sort({ at: -1 })
          .limit(cap + 1),
        (l) => {
          const d = slot(l.at);
          if (d) d.credits += l.kind === 'refund' ? -l.millicredits : l.millicredits;
        },
      ),
    ]);
    // Summed in millicredits (exact), shown in credits.
    for (const d of days) d.credits = fromUnits(d.credits);
    return { days, requestsCappedAt, creditsCappedAt };
  };

  return {
    forAccount(accountId: string) {
      const apiKeys = accountSlice(db.apiKeys, accountId);
      const audit = accountSlice(db.audit, accountId);
      const ledger = accountSlice(db.ledger, accountId);
      const jobs = accountSlice(db.jobs, accountId);
      return {
        keys: (): Promise<ApiKeyDoc[]> => apiKeys.find({}).sort({ createdAt: -1, _id: -1 }).limit(500).toArray(),

        key: (keyId: string) => apiKeys.findOne({ _id: keyId }),

        /** A page of the audit log, newest first, within the last AUDIT_DAYS days and the filters. */
        async auditPage(f: AuditFilter, now = new Date()): Promise<AuditPage> {
          const rows = await audit
            .find(auditQuery(f, now))
            .sort({ at: -1, _id: -1 })
            .limit(PAGE_SIZE + 1)
            .toArray();
          const data = rows.slice(0, PAGE_SIZE);
          const last = data[data.length - 1];
          return {
            data,
            cursor: rows.length > PAGE_SIZE && last ? encodeCursor(AUDIT_TAG, last.at, last._id) : null,
          };
        },

        /** A page of the credit ledger, newest first. */
        ledgerPage: (cursor?: string): Promise<Page<LedgerDoc>> =>
          keysetPage(
            ledger,
            {},
            { tag: 'console:ledger:at:desc', field: 'at', direction: -1, limit: PAGE_SIZE, cursor },
          ),

        /** The newest jobs, without their (possibly large) input. */
        recentJobs: (limit = PAGE_SIZE): Promise<Omit<JobDoc, 'input'>[]> =>
          jobs
            .find({}, { projection: { input: 0 } })
            .sort({ createdAt: -1, _id: -1 })
            .limit(limit)
            .toArray(),

        /**
         * Requests (audit log) and credits spent net of refunds (ledger) per UTC day for the last
         * CHART_DAYS days, oldest first. FerretDB 1.24 has no date operators in $group, so the
         * timestamps are streamed (one field each) and counted here: the cost grows with the month's
         * traffic (about 3 s per 20,000 calls on FerretDB). Hence at most `cap` entries of each source
         * are read (newest first; exact below it), concurrent views of an account share one count,
         * and its result is reused for USAGE_CACHE_MS.
         */
        dailyUsage(now = new Date()): Promise<Usage> {
          const hit = usageCache.get(accountId);
          if (hit && hit.until > Date.now()) return hit.usage;
          const entry = { until: Number.POSITIVE_INFINITY, usage: countDays(audit, ledger, now) };
          usageCache.delete(accountId);
          usageCache.set(accountId, entry);
          if (usageCache.size > USAGE_CACHE_MAX) usageCache.delete(usageCache.keys().next().value!);
          entry.usage.then(
            () => {
              entry.until = Date.now() + USAGE_CACHE_MS;
            },
            () => {
              if (usageCache.get(accountId) === entry) usageCache.delete(accountId);
            },
          );
          return entry.usage;
        },
      };
    },
  };
}
