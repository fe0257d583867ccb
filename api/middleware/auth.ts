import type { RequestHandler } from 'express';
import { API_PLANS } from '../../contracts/registry';
import type { Authenticated } from '../../platform/accounts/accounts';
import { AppError } from '../../platform/infra/errors';
import { locals } from '../http/context';

/**
 * Bearer svc_… → account and key, on every request, through the process's auth cache (no
 * database read on a hit; a revoked key is refused within milliseconds, see createAuthCache).
 */
export function authenticate(accounts: {
  authenticate(presented: string): Promise<Authenticated | null>;
}): RequestHandler {
  return async (req, res, next) => {
    const header = req.get('authorization') ?? '';
    const m = /^Bearer\s+(\S+)$/i.exec(header);
    if (!m?.[1]) return next(new AppError('unauthorized', 'missing API key: send Authorization: Bearer svc_…'));
    const found = await accounts.authenticate(m[1]);
    if (!found) return next(new AppError('unauthorized', 'invalid or revoked API key'));
    if (!API_PLANS.includes(found.account.plan)) {
      return next(
        new AppError('plan_required', `the ${found.account.plan} plan has no API access; upgrade to Pro or Teams`),
      );
    }
    locals(res).auth = found;
    next();
  };
}
