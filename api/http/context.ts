import type { Response } from 'express';
import type { Authenticated } from '../../platform/accounts/accounts';

/** What authentication leaves on the request for the handlers (the account without its balance). */
export type AuthContext = Authenticated;

export interface RequestLocals {
  requestId: string;
  auth?: AuthContext;
  /** Millicredits this request charged, for the audit log. */
  millicreditsCharged: number;
  startedAt: bigint;
  /**
   * The database was known to be away when the request came in (api/middleware/database.ts):
   * the rate limit lets it by, and its route answers 503 at once, under the route's own name.
   */
  databaseDown?: boolean;
}

export const locals = (res: Response) => res.locals as RequestLocals;
