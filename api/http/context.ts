import type { Request, Response } from 'express';
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
export const requestIdOf = (req: Request) => (req.res ? locals(req.res).requestId : 'unknown');
