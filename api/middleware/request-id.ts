import { randomUUID } from 'node:crypto';
import type { RequestHandler } from 'express';
import { startContext } from '../../platform/infra/context';
import type { RequestLocals } from '../http/context';

const SAFE = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * X-Request-Id on every response: the caller's when it is sane, else a new one. The rest of the
 * request runs in its work context, so every log line it causes names it.
 */
export const requestId: RequestHandler = (req, res, next) => {
  const incoming = req.get('x-request-id');
  const id = incoming && SAFE.test(incoming) ? incoming : `req_${randomUUID().replaceAll('-', '')}`;
  const l: RequestLocals = { requestId: id, millicreditsCharged: 0, startedAt: process.hrtime.bigint() };
  Object.assign(res.locals, l);
  res.setHeader('X-Request-Id', id);
  startContext({ requestId: id }, next);
};
