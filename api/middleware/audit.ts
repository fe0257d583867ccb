import type { RequestHandler } from 'express';
import type { Logger } from '../../platform/log';
import { newId } from '../../platform/ids';
import type { Database } from '../../platform/mongo';
import { locals } from '../http/context';
import { routeTemplate } from './http-metrics';

/**
 * Append-only usage and audit log: one entry per authenticated call, written when the response
 * finishes. Never argument values: the route template, not the path; no query, no body.
 */
export function audit(db: Database, log: Logger): RequestHandler {
  return (req, res, next) => {
    res.once('finish', () => {
      const l = locals(res);
      if (!l.auth) return;
      db.audit
        .insertOne({
          _id: newId('aud'),
          at: new Date(),
          accountId: l.auth.account._id,
          keyId: l.auth.key._id,
          method: req.method,
          route: routeTemplate(req),
          status: res.statusCode,
          durationMs: Number(process.hrtime.bigint() - l.startedAt) / 1e6,
          creditsCharged: l.creditsCharged,
          requestId: l.requestId,
        })
        .catch((err: Error) => log.error('audit write failed', { requestId: l.requestId, err }));
    });
    next();
  };
}
