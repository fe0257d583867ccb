import type { Response } from 'express';
import type { Authenticated } from '../../platform/accounts';

/** What authentication leaves on the request for the handlers (the account without its balance). */
export type AuthContext = Authenticated;

export interface RequestLocals {
  requestId: string;
  auth?: AuthContext;
  /** Credits this request charged, for the audit log. */
  creditsCharged: number;
  startedAt: bigint;
}

export const locals = (res: Response) => res.locals as RequestLocals;
