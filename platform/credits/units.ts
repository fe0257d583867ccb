import type { Logger } from '../infra/log';
import { COLLECTIONS, type Store } from '../infra/mongo';
import { createUnitsMigrationStore } from './credits.repository';

/**
 * Credits are stored, added and compared as integer millicredits (thousandths of a credit; every
 * price is a whole number of them, config.ts refuses a finer one), so no sum ever drifts (a balance
 * once read back as 713.2500000000001). Conversions happen at the edges only: a price into
 * millicredits where a charge is computed (`millicreditsFor`), millicredits into a decimal number
 * of credits in JSON (`fromUnits`).
 */
export const MILLICREDITS_PER_CREDIT = 1000;

/** Credits (a decimal number, at most 3 decimals) as integer millicredits: 713.25 → 713250. */
export function toUnits(credits: number): number {
  const units = Math.round(credits * MILLICREDITS_PER_CREDIT);
  if (!Number.isSafeInteger(units)) throw new RangeError(`not a number of credits: ${credits}`);
  return units;
}

/** Integer millicredits as credits, the nearest double to the exact decimal (713250 → 713.25). */
export function fromUnits(units: number): number {
  return units / MILLICREDITS_PER_CREDIT;
}

/** The exact sum of amounts in credits (each of at most 3 decimals), added as millicredits: 0.1 + 0.2 → 0.3. */
export function addCredits(...amounts: number[]): number {
  return fromUnits(amounts.reduce((n, a) => n + toUnits(a), 0));
}

/**
 * Fields that held decimal credits before millicredits, per collection: old name → new name.
 * The first pair's old field says a document is in the old format.
 */
const DECIMAL_CREDIT_FIELDS: readonly { collection: string; fields: readonly [string, string][] }[] = [
  { collection: COLLECTIONS.accounts, fields: [['credits', 'millicredits']] },
  { collection: COLLECTIONS.ledger, fields: [['amount', 'millicredits']] },
  { collection: COLLECTIONS.creditHolds, fields: [['amount', 'millicredits']] },
  {
    collection: COLLECTIONS.creditLeases,
    fields: [
      ['amount', 'millicredits'],
      ['spent', 'spentMillicredits'],
    ],
  },
  { collection: COLLECTIONS.jobs, fields: [['credits.amount', 'credits.millicredits']] },
  { collection: COLLECTIONS.audit, fields: [['creditsCharged', 'millicreditsCharged']] },
  {
    collection: COLLECTIONS.liveSessions,
    fields: [
      ['charge.amount', 'charge.millicredits'],
      ['spent', 'spentMillicredits'],
    ],
  },
];

const MIGRATION_ID = 'credit-units-millicredits';

const valueAt = (doc: Record<string, unknown>, path: string): unknown =>
  path
    .split('.')
    .reduce<unknown>((v, k) => (v && typeof v === 'object' ? (v as Record<string, unknown>)[k] : undefined), doc);

/**
 * Convert documents stored with decimal credits (before millicredits) at startup, before the
 * process serves; every process runs it (API, scheduler, workers: createRuntime).
 *
 * Safe with several processes at once, and after a crash half-way, without a lock: the format is
 * in the field's name (`credits` decimal, `millicredits` integer), and each document is converted
 * by ONE conditional update whose filter holds the old values it read: `$set` the new fields,
 * `$unset` the old ones. A second process converting the same document matches nothing (the old
 * field is gone), so nothing is converted twice; new documents never carry an old field. Once a
 * pass found nothing left, a `migrations` document records it and later starts skip the scans.
 * Processes of the version before must be stopped first: they would write the old fields again.
 */
export async function migrateCreditUnits(store: Store, log?: Logger): Promise<{ converted: number }> {
  const migration = createUnitsMigrationStore(store);
  if (await migration.ran(MIGRATION_ID)) return { converted: 0 };
  let converted = 0;
  for (const { collection, fields } of DECIMAL_CREDIT_FIELDS) {
    let after: string | null = null;
    for (;;) {
      const batch = await migration.carrying(collection, fields[0]![0], after, 500);
      if (!batch.length) break;
      for (const doc of batch) {
        const filter: Record<string, unknown> = { _id: doc._id };
        const set: Record<string, number> = {};
        const unset: Record<string, ''> = {};
        for (const [from, to] of fields) {
          const old = valueAt(doc, from);
          if (old === undefined) continue;
          filter[from] = old;
          set[to] = toUnits(typeof old === 'number' ? old : 0);
          unset[from] = '';
        }
        converted += await migration.convert(collection, filter, set, unset);
      }
      after = batch[batch.length - 1]!._id;
    }
  }
  await migration.record(MIGRATION_ID);
  if (converted) log?.info('stored credits converted to millicredits', { documents: converted });
  return { converted };
}
