import express, { Router, type NextFunction, type Request, type Response } from 'express';
import { z } from 'zod';
import { SCOPES } from '../../contracts/registry';
import type { AuditRecorder } from '../../platform/audit/audit.recorder';
import { AppError } from '../../platform/infra/errors';
import { fromUnits } from '../../platform/credits/credits';
import { newId } from '../../platform/infra/ids';
import { createDriveRepository } from '../../platform/drive/drive.repository';
import type { Runtime } from '../../platform/runtime';
import { createDeliveriesRepository } from '../../platform/webhooks/deliveries.repository';
import { createSecretBox } from '../../platform/webhooks/secrets';
import { createWebhooksRepository } from '../../platform/webhooks/webhooks.repository';
import { locals } from '../http/context';
import { createWebhooksService } from '../../platform/webhooks/webhooks.service';
import {
  AuditFilterSchema,
  createConsoleQueries,
  type ConsoleQueryOptions,
} from '../../platform/console/console.repository';
import { createConsoleSessions, safeEqual, sessionSettings } from '../../platform/console/sessions.repository';
import { CONSOLE_CSS } from './console.styles';
import {
  auditPage,
  creditsPage,
  errorPage,
  jobsPage,
  keysPage,
  overviewPage,
  signInConfirm,
  signInHelp,
  webhooksPage,
  type Viewer,
} from './console.views';
import type { Html } from './html';

/** What the developer console shares with the REST API of this process. */
export interface ConsoleParts {
  /** Console actions (sign-in, sign-out, key created or revoked, webhook re-enabled) go in the account's audit log. */
  audit: AuditRecorder;
}

/** The session cookie's name. WARNING: changing it signs everyone out. */
export const SESSION_COOKIE = 'console_session';

/**
 * Headers of every console response: no caching of account data, no framing, a strict CSP, and
 * no referrer to other sites (sign-in links carry a token). `same-origin`, not `no-referrer`:
 * under no-referrer browsers send `Origin: null` on the console's own form POSTs, which the
 * origin check (sameOriginPost) must then refuse.
 */
const SECURITY_HEADERS: Record<string, string> = {
  'Cache-Control': 'no-store',
  'Content-Security-Policy':
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'Referrer-Policy': 'same-origin',
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
};

/**
 * One cookie's value from a Cookie header. Hand-written: the `cookie` package is only a
 * transitive dependency of Express here, and reading one name needs a split.
 */
export function readCookie(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === name) return part.slice(i + 1).trim();
  }
  return undefined;
}

const KeyFormSchema = z.object({
  name: z.string().trim().min(1, 'Name: give the key a name').max(100, 'Name: at most 100 characters'),
  scopes: z
    .preprocess(
      (v) => (v === undefined ? [] : Array.isArray(v) ? v : [v]),
      z.array(z.enum(SCOPES, { error: 'Scopes: unknown scope' })).min(1, 'Scopes: choose at least one'),
    )
    .transform((s) => [...new Set(s)]),
  folderPins: z
    .preprocess((v) => (v === undefined ? '' : v), z.string().max(2000))
    .transform((s) => s.split(/[\s,]+/).filter(Boolean))
    .pipe(
      z
        .array(z.string().regex(/^[A-Za-z0-9_-]{1,100}$/, 'Drive folder pins: folder ids such as dfo_…'))
        .max(20, 'Drive folder pins: at most 20'),
    ),
});

const render = (res: Response, page: Html, status = 200) => void res.status(status).type('html').send(page.value);

/**
 * Whether a POST came from a page of this console: refused when the browser says it came from
 * another site (`Sec-Fetch-Site` other than same-origin) or names another origin (`Origin`).
 * Clients that send neither header (scripts, old browsers) pass; every signed-in form also
 * carries the session's CSRF token, and this check covers the sign-in POST, which has none
 * (login CSRF: a page elsewhere signing a visitor into the attacker's account).
 */
function sameOriginPost(headers: { secFetchSite?: string; origin?: string }, publicOrigin: string): boolean {
  if (headers.secFetchSite !== undefined && headers.secFetchSite !== 'same-origin') return false;
  return headers.origin === undefined || headers.origin === publicOrigin;
}

/** The developer console (server-rendered pages), mounted at /console. */
// Length: the console's route table: 21 handlers on one router share the session store, the queries and the
// services built above them; the longest handler is 30 lines.
export function consoleRoutes(rt: Runtime, parts: ConsoleParts, options: ConsoleQueryOptions = {}): Router {
  const r = Router();
  const sessions = createConsoleSessions(rt.store, sessionSettings(rt.config));
  const queries = createConsoleQueries(rt.store, options);
  const publicOrigin = new URL(rt.config.PUBLIC_BASE_URL).origin;
  const webhooks = createWebhooksService({
    webhooks: createWebhooksRepository(rt.store),
    deliveries: createDeliveriesRepository(rt.store),
    box: createSecretBox(rt.config.WEBHOOK_SECRET_KEY),
    allowLoopback: rt.config.ALLOW_LOOPBACK_URLS,
  });
  const drive = createDriveRepository(rt.store);
  const cookieOptions = {
    httpOnly: true,
    sameSite: 'lax' as const,
    secure: rt.config.PUBLIC_BASE_URL.startsWith('https:'),
    path: '/console',
    maxAge: sessionSettings(rt.config).sessionTtlMs,
  };
  /** An audit entry for a console action, stored before the answer goes out. Never a key value or token: ids and the status only. */
  const trail = (res: Response, accountId: string, route: string, status: number, keyId = '') =>
    parts.audit.record({
      _id: newId('aud'),
      at: new Date(),
      accountId,
      keyId,
      method: 'POST',
      route,
      status,
      durationMs: Number(process.hrtime.bigint() - locals(res).startedAt) / 1e6,
      millicreditsCharged: 0,
      requestId: locals(res).requestId,
      via: 'console',
    });

  r.use((_req, res, next) => {
    res.set(SECURITY_HEADERS);
    next();
  });
  r.use((req, res, next) => {
    if (
      req.method !== 'POST' ||
      sameOriginPost({ secFetchSite: req.get('sec-fetch-site'), origin: req.get('origin') }, publicOrigin)
    )
      return next();
    render(
      res,
      errorPage(
        403,
        'This form was sent from another site, so it was refused. Open the console at its own address and try again.',
      ),
      403,
    );
  });
  r.use(express.urlencoded({ extended: false, limit: '16kb', parameterLimit: 50 }));
  r.get(
    '/assets/console.css',
    (_req, res) => void res.type('css').set('Cache-Control', 'public, max-age=3600').send(CONSOLE_CSS),
  );

  // Signing in: GET shows a button (a link scanner that only fetches cannot spend the link), the
  // POST spends it. It carries no CSRF token (there is no session yet): the Origin check above
  // refuses it from another site.
  r.get('/sign-in', (req, res) => {
    const token = typeof req.query.token === 'string' ? req.query.token : '';
    render(res, token ? signInConfirm(token) : signInHelp());
  });
  r.post('/sign-in', async (req, res) => {
    const token = typeof req.body?.token === 'string' ? req.body.token : '';
    const signed = await sessions.signIn(token);
    if (!signed)
      return render(
        res,
        signInHelp(
          'This sign-in link is not valid: it was used already, it expired, or it was copied incompletely. Ask for a new one.',
        ),
        400,
      );
    await trail(res, signed.session.accountId, '/console/sign-in', 303);
    res.cookie(SESSION_COOKIE, signed.sessionId, cookieOptions);
    res.redirect(303, '/console');
  });

  // Everything below needs a session; POSTs also need the session's CSRF token.
  r.use(async (req, res, next) => {
    const id = readCookie(req.headers.cookie, SESSION_COOKIE);
    const resumed = id ? await sessions.resume(id) : null;
    const account = resumed ? await rt.accounts.forAccount(resumed.session.accountId).get() : null;
    if (!resumed || !account) {
      if (id) res.clearCookie(SESSION_COOKIE, { path: '/console' });
      return res.redirect(303, '/console/sign-in');
    }
    if (resumed.extended) res.cookie(SESSION_COOKIE, id!, cookieOptions);
    res.locals.viewer = {
      accountId: account._id,
      accountName: account.name,
      csrf: resumed.session.csrf,
    } satisfies Viewer;
    if (req.method === 'POST') {
      const sent = typeof req.body?._csrf === 'string' ? req.body._csrf : '';
      if (!sent || !safeEqual(sent, resumed.session.csrf))
        return render(
          res,
          errorPage(
            403,
            'This form was not sent by a page of this console (missing or wrong CSRF token). Reload the page and try again.',
            res.locals.viewer as Viewer,
          ),
          403,
        );
    }
    next();
  });
  const viewer = (res: Response) => res.locals.viewer as Viewer;

  r.post('/sign-out', async (req, res) => {
    await sessions.end(readCookie(req.headers.cookie, SESSION_COOKIE)!);
    await trail(res, viewer(res).accountId, '/console/sign-out', 303);
    res.clearCookie(SESSION_COOKIE, { path: '/console' });
    res.redirect(303, '/console/sign-in');
  });

  r.get('/', async (_req, res) => {
    const v = viewer(res);
    const mine = queries.forAccount(v.accountId);
    const [account, balance, keys, usage, jobs] = await Promise.all([
      rt.accounts.forAccount(v.accountId).get(),
      rt.credits.balance(v.accountId),
      mine.keys(),
      mine.dailyUsage(),
      mine.recentJobs(5),
    ]);
    render(
      res,
      overviewPage(v, {
        plan: account?.plan ?? '',
        balance: fromUnits(balance),
        activeKeys: keys.filter((k) => !k.revokedAt).length,
        usage,
        jobs,
      }),
    );
  });

  r.get('/keys', async (_req, res) =>
    render(res, keysPage(viewer(res), { keys: await queries.forAccount(viewer(res).accountId).keys() })),
  );
  r.post('/keys', async (req, res) => {
    const v = viewer(res);
    const mine = queries.forAccount(v.accountId);
    const parsed = KeyFormSchema.safeParse(req.body ?? {});
    const form = {
      name: String(req.body?.name ?? ''),
      scopes: ([] as string[]).concat(req.body?.scopes ?? []),
      folderPins: String(req.body?.folderPins ?? ''),
    };
    if (!parsed.success) {
      await trail(res, v.accountId, '/console/keys', 400);
      return render(
        res,
        keysPage(v, {
          keys: await mine.keys(),
          error: parsed.error.issues.map((i) => i.message).join('; '),
          form,
        }),
        400,
      );
    }
    const myDrive = drive.forAccount(v.accountId);
    for (const pin of parsed.data.folderPins) {
      if (!(await myDrive.ownFolderExists(pin))) {
        await trail(res, v.accountId, '/console/keys', 404);
        throw new AppError('not_found', `Drive folder ${pin} not found in this account's Drive`);
      }
    }
    const created = await rt.accounts.forAccount(v.accountId).createKey(parsed.data);
    await trail(res, v.accountId, '/console/keys', 201, created.doc._id);
    render(res, keysPage(v, { keys: await mine.keys(), created }), 201);
  });
  r.post('/keys/:id/revoke', async (req, res) => {
    const v = viewer(res);
    if (!(await queries.forAccount(v.accountId).key(req.params.id!))) {
      await trail(res, v.accountId, '/console/keys/:id/revoke', 404);
      throw new AppError('not_found', 'key not found');
    }
    // Stored, then announced to every API process (platform/accounts/accounts.ts): refused within milliseconds.
    await rt.accounts.forAccount(v.accountId).revokeKey(req.params.id!);
    await trail(res, v.accountId, '/console/keys/:id/revoke', 303, req.params.id!);
    res.redirect(303, '/console/keys');
  });

  r.get('/audit', async (req, res) => {
    const v = viewer(res);
    const mine = queries.forAccount(v.accountId);
    const keys = await mine.keys();
    const parsed = AuditFilterSchema.safeParse(req.query);
    if (!parsed.success) {
      const error = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
      return render(res, auditPage(v, { page: { data: [], cursor: null }, filter: {}, keys, error }), 400);
    }
    render(res, auditPage(v, { page: await mine.auditPage(parsed.data), filter: parsed.data, keys }));
  });

  r.get('/credits', async (req, res) => {
    const v = viewer(res);
    const cursor = typeof req.query.cursor === 'string' && req.query.cursor ? req.query.cursor : undefined;
    const [account, balance, ledger] = await Promise.all([
      rt.accounts.forAccount(v.accountId).get(),
      rt.credits.balance(v.accountId),
      queries.forAccount(v.accountId).ledgerPage(cursor),
    ]);
    render(
      res,
      creditsPage(v, {
        plan: account?.plan ?? '',
        balance: fromUnits(balance),
        prices: rt.config.CREDIT_PRICES,
        ledger,
        cursor,
      }),
    );
  });

  r.get('/webhooks', async (_req, res) =>
    render(res, webhooksPage(viewer(res), { webhooks: (await webhooks.list(viewer(res).accountId)).data })),
  );
  r.get('/webhooks/:id', async (req, res) => {
    const v = viewer(res);
    const cursor = typeof req.query.cursor === 'string' && req.query.cursor ? req.query.cursor : undefined;
    const webhook = await webhooks.get(v.accountId, req.params.id!);
    const [all, page] = await Promise.all([
      webhooks.list(v.accountId),
      webhooks.deliveries(v.accountId, webhook.id, { limit: 50, cursor }),
    ]);
    render(
      res,
      webhooksPage(v, { webhooks: all.data, selected: { webhook, deliveries: page.data, cursor: page.cursor } }),
    );
  });
  // The same service call as PATCH /webhooks/{id} {"isActive": true}: re-enabled, failure count reset.
  r.post('/webhooks/:id/enable', async (req, res) => {
    const v = viewer(res);
    const w = await webhooks.update(v.accountId, req.params.id!, { isActive: true }).catch(async (err: unknown) => {
      await trail(res, v.accountId, '/console/webhooks/:id/enable', err instanceof AppError ? err.status : 500);
      throw err;
    });
    await trail(res, v.accountId, '/console/webhooks/:id/enable', 303);
    res.redirect(303, `/console/webhooks/${encodeURIComponent(w.id)}`);
  });

  r.get('/jobs', async (_req, res) =>
    render(res, jobsPage(viewer(res), await queries.forAccount(viewer(res).accountId).recentJobs())),
  );

  r.use((_req, res) =>
    render(res, errorPage(404, 'There is no such page in the console.', res.locals.viewer as Viewer | undefined), 404),
  );
  r.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const v = res.locals.viewer as Viewer | undefined;
    if (err instanceof AppError && err.status < 500)
      return render(res, errorPage(err.status, err.message, v), err.status);
    const status = (err as { status?: unknown }).status;
    // Body parser refusals (too large, malformed): the visitor's fault, said plainly.
    if (typeof status === 'number' && status >= 400 && status < 500)
      return render(res, errorPage(status, 'The form could not be read.', v), status);
    rt.log.error('console page failed', { err: err as Error });
    render(res, errorPage(500, 'Something failed on our side; try again.', v), 500);
  });
  return r;
}
