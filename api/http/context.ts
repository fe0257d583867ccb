import type { Response } from 'express';
import type { AccountDoc, ApiKeyDoc } from '../../platform/mongo';

/** What authentication leaves on the request for the handlers. */
export interface AuthContext {
  account: AccountDoc;
  key: ApiKeyDoc;
}

export interface RequestLocals {
  requestId: string;
  auth?: AuthContext;
  /** Credits this request charged, for the audit log. */
  creditsCharged: number;
  startedAt: bigint;
}

export const locals = (res: Response) => res.locals as RequestLocals;
