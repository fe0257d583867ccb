import type { RequestHandler, Response } from 'express';
import type { AuditRecorder } from '../../platform/audit/audit.recorder';
import { newId } from '../../platform/infra/ids';
import { locals } from '../http/context';
import { routeTemplate } from './http-access';

/**
 * Append-only usage and audit log: one entry per authenticated call (refused ones included:
 * this runs before the rate limit). Never argument values: the route template, not the path;
 * no query, no body.
 *
 * The entry is recorded when the response ends (the status is known then) and BEFORE the
 * response goes out: `res.end` is held until the recorder has inserted the entry into
 * `audit_log` (group commit: one insertMany for the entries of concurrent requests), or, when
 * the database is away, has the broker's confirm for it on the audit queue, whose writer
 * (platform/audit/audit.writer.ts) stores it later. So an API process killed right after
 * answering loses no entry.
 *
 * A client that goes away does not lose the entry: handlers still end their response (a no-op
 * on a closed socket) and it is recorded then, with what they charged; one that has not ended
 * CLOSE_GRACE_MS after the connection closed is recorded then, with the status it had (the
 * stream's 200, or 499 "client closed request" when nothing was sent).
 */
const CLOSE_GRACE_MS = 5000;

export function audit(recorder: AuditRecorder): RequestHandler {
  return (req, res, next) => {
    const end = res.end.bind(res) as (...args: unknown[]) => Response;
    let state: 'open' | 'recording' | 'done' = 'open';
    let late = false;
    const entry = (status: number) => {
      const l = locals(res);
      return {
        _id: newId('aud'),
        at: new Date(),
        accountId: l.auth!.account._id,
        keyId: l.auth!.key._id,
        method: req.method,
        route: routeTemplate(req),
        status,
        durationMs: Number(process.hrtime.bigint() - l.startedAt) / 1e6,
        millicreditsCharged: l.millicreditsCharged,
        requestId: l.requestId,
      };
    };
    res.on('close', () => {
      if (state !== 'open') return;
      setTimeout(() => {
        if (state !== 'open' || !locals(res).auth) return;
        state = 'done';
        void recorder.record(entry(res.headersSent ? res.statusCode : 499));
      }, CLOSE_GRACE_MS).unref();
    });
    res.end = ((...args: unknown[]) => {
      if (state === 'done') return end(...args);
      if (state === 'recording') {
        late = true; // a second end (an error after the answer): the first answer wins
        return res;
      }
      const l = locals(res);
      if (!l.auth) {
        state = 'done';
        return end(...args);
      }
      state = 'recording';
      const status = res.statusCode;
      const headers = res.getHeaders();
      void recorder.record(entry(status)).then(() => {
        state = 'done';
        if (late && !res.headersSent) {
          for (const name of res.getHeaderNames()) if (!(name in headers)) res.removeHeader(name);
          for (const [name, value] of Object.entries(headers)) if (value !== undefined) res.setHeader(name, value);
          res.statusCode = status;
        }
        end(...args);
      });
      return res;
    }) as Response['end'];
    next();
  };
}
