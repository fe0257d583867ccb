import { Router } from 'express';
import { endpoints } from '../../contracts/endpoints';
import { fromUnits } from '../../platform/credits/credits';
import type { Runtime } from '../../platform/runtime';
import { mount, type RouteDeps } from '../http/route';

export function accountRoutes(rt: Runtime, deps: RouteDeps) {
  const r = Router();
  mount(
    r,
    endpoints.getAccount,
    async ({ auth: { account, key } }) => ({
      id: account._id,
      name: account.name,
      plan: account.plan,
      apiAccess: true,
      features: account.features,
      key: {
        id: key._id,
        name: key.name,
        prefix: key.prefix,
        scopes: key.scopes,
        createdAt: key.createdAt.toISOString(),
      },
      createdAt: account.createdAt.toISOString(),
    }),
    deps,
  );
  mount(
    r,
    endpoints.getCredits,
    async ({ auth: { account } }) => ({
      plan: account.plan,
      // Stored in millicredits, answered in credits (713250 → 713.25).
      balance: fromUnits(await rt.credits.balance(account._id)),
      prices: rt.config.CREDIT_PRICES,
    }),
    deps,
  );
  return r;
}
