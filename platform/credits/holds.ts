import type { CreditOperation } from '../../contracts/registry';
import { AppError } from '../infra/errors';
import { isDuplicateKey } from '../infra/mongo';
import { newId } from '../infra/ids';
import type { CreditsRepository, HoldDelivery } from './credits.repository';
import type { Ledger } from './ledger';

/**
 * Holds: a debit for a synchronous call, provisional until the call's outcome is known
 * (`capture` when it delivered, `release` when it failed), and settled by the scheduler when the
 * waiting process died (`settleExpiredHolds`).
 */

/** How long a fence keeps a given-back hold's id taken. */
const FENCE_KEEP_MS = 24 * 3600_000;

export function createHolds(repo: CreditsRepository, ledger: Ledger) {
  const api = {
    /**
     * Debit for a synchronous call (POST /images, /sheets/{id}/edit, /extract-flowchart): the
     * debit is recorded as a hold until `capture` (delivered) or `release` (refunded). If the
     * process dies while it waits, the scheduler settles holds past `until`: released, unless
     * `deliveredBy` names a document that exists (the call delivered and the process died before
     * capturing), then captured. So a lost answer is never paid for and a delivery never free.
     *
     * `id` names the hold (e.g. derived from an Idempotency-Key, so a retry finds it); an id
     * whose debit exists already (the hold was settled) gets a fresh one instead.
     */
    async hold(input: {
      accountId: string;
      operation: CreditOperation;
      millicredits: number;
      requestId: string;
      ttlMs: number;
      id?: string;
      deliveredBy?: HoldDelivery;
    }): Promise<string> {
      const used = input.id !== undefined && (await ledger.debited(input.id));
      const id = input.id !== undefined && !used ? input.id : newId('hold');
      await ledger.debit({
        accountId: input.accountId,
        operation: input.operation,
        millicredits: input.millicredits,
        requestId: input.requestId,
        jobId: id,
      });
      try {
        await repo.insertHold({
          _id: id,
          accountId: input.accountId,
          operation: input.operation,
          millicredits: input.millicredits,
          until: new Date(Date.now() + input.ttlMs),
          deliveredBy: input.deliveredBy ?? null,
        });
      } catch (err) {
        // Fenced: this request took longer than CHARGE_SETTLE_GRACE_MS between its debit and its
        // hold, and the scheduler gave the debit back. Nothing is delivered, nothing is charged.
        if (isDuplicateKey(err))
          throw new AppError(
            'service_unavailable',
            'the call could not be started in time and was not charged; retry it',
            { cause: err },
          );
        throw err;
      }
      await ledger.confirm(id, input.accountId);
      return id;
    },

    /**
     * Keep a hold from being settled for `ttlMs` more. Call it right before writing what the hold
     * pays for: false when a settler took the hold over already (it is being or was released),
     * then write nothing. One conditional update, so it and a settler's claim never both win.
     */
    async extend(holdId: string, ttlMs: number): Promise<boolean> {
      return repo.extendHold(holdId, new Date(Date.now() + ttlMs));
    },

    /** Whether a hold is still waiting (neither captured nor released). */
    async pending(holdId: string): Promise<boolean> {
      return repo.holdExists(holdId);
    },

    /** The call delivered: the charge stands. */
    async capture(holdId: string): Promise<void> {
      await repo.deleteHold(holdId);
    },

    /**
     * Settle a hold: take it over (no `extend` wins after this), then capture it when its
     * `deliveredBy` document exists, else give the credits back (idempotent per hold).
     * `expiredBefore` settles it only if its `until` is before then (the sweeper). 'gone' when
     * there was no such hold (captured, released, or extended meanwhile).
     */
    async settle(holdId: string, opts: { expiredBefore?: Date } = {}): Promise<'captured' | 'released' | 'gone'> {
      const h = await repo.claimHold(holdId, opts.expiredBefore);
      if (!h) return 'gone';
      if (h.deliveredBy && (await repo.forAccount(h.accountId).delivered(h.deliveredBy))) {
        await repo.deleteHold(holdId);
        return 'captured';
      }
      // Refund first (idempotent per hold), then forget the hold: a crash between leaves it for the sweeper.
      await ledger.refund({
        accountId: h.accountId,
        operation: h.operation,
        millicredits: h.millicredits,
        jobId: h._id,
      });
      await repo.deleteHold(holdId);
      return 'released';
    },

    /** The call failed: give the credits back, unless what the hold pays for exists after all (see `settle`). True when released. */
    async release(holdId: string): Promise<boolean> {
      return (await api.settle(holdId)) === 'released';
    },

    /** Settle holds whose call outlived its deadline (the waiting process died): captured when delivered, else released. */
    async settleExpiredHolds(now = new Date()): Promise<{ released: number; captured: number }> {
      await repo.dropFences(new Date(now.getTime() - FENCE_KEEP_MS));
      const expired = await repo.expiredHolds(now);
      const out = { released: 0, captured: 0 };
      for (const h of expired) {
        const r = await api.settle(h._id, { expiredBefore: now });
        if (r !== 'gone') out[r]++;
      }
      return out;
    },
  };
  return api;
}
