import { client, type Client } from '../../scripts/harness/http';
import type { Stack } from '../../scripts/harness/stack';
import { fromUnits } from '../../platform/credits/credits';

/**
 * What the space suites ask of their stack: an account with 1,000 credits and its client, the
 * account's ledger as [kind, operation, amount] (the accept batch written first), and the balance.
 * `stack` is a getter: the suites start theirs in `before`.
 */
export function spaceKit(stack: () => Stack) {
  return {
    account: async () => {
      const a = await stack().createAccount({ credits: 1000 });
      return { ...a, api: client(stack().baseUrl, a.key) };
    },
    ledger: async (accountId: string) => {
      await stack().rt.jobs.flushAccepted();
      return (await stack().db.ledger.find({ accountId }).sort({ at: 1 }).toArray()).map((e) => [
        e.kind,
        e.operation,
        fromUnits(e.millicredits),
      ]);
    },
    balance: async (api: Client) => (await api.get('/account/credits')).body.balance as number,
  };
}
