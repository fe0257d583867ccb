import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Collection } from 'mongodb';
import { COLLECTIONS, type Store, openStore } from '../infra/mongo';
import { accountSlice } from '../infra/tenant';

/** A one-time sign-in link. WARNING: persisted; `_id` is the sha256 of the token, never the token. */
export interface ConsoleLinkDoc {
  _id: string;
  accountId: string;
  createdAt: Date;
  expiresAt: Date;
  usedAt: Date | null;
}

/** A console session. WARNING: persisted; `_id` is the sha256 of the cookie value, never the value. */
export interface ConsoleSessionDoc {
  _id: string;
  accountId: string;
  /** The per-session CSRF token every form carries (a hidden field). */
  csrf: string;
  createdAt: Date;
  lastSeenAt: Date;
  expiresAt: Date;
}

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');
const secret = () => randomBytes(32).toString('base64url');

/** Constant-time equality of two strings of any length (both hashed first, so lengths do not leak). */
export const safeEqual = (a: string, b: string): boolean =>
  timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest());

/** Session extension happens at most this often, so browsing costs one write a minute, not one per page. */
const TOUCH_EVERY_MS = 60_000;

export interface ConsoleSessionSettings {
  linkTtlMs: number;
  sessionTtlMs: number;
}

/**
 * Sign-in links and sessions of the developer console. Both secrets are 256 random bits handed
 * to the browser or the operator and stored only as their sha256, so a database dump signs no
 * one in. A link works once (the first consume marks it used atomically) and expires after
 * `linkTtlMs`; a session slides: each use within its lifetime extends it by `sessionTtlMs`.
 */
export function createConsoleSessions(store: Store, s: ConsoleSessionSettings) {
  const db = openStore(store);
  const links: Collection<ConsoleLinkDoc> = db.db.collection<ConsoleLinkDoc>(COLLECTIONS.consoleLinks);
  const sessions: Collection<ConsoleSessionDoc> = db.db.collection<ConsoleSessionDoc>(COLLECTIONS.consoleSessions);
  const expireOld = async () => {
    const now = new Date();
    await Promise.all([
      links.deleteMany({ expiresAt: { $lt: now } }),
      sessions.deleteMany({ expiresAt: { $lt: now } }),
    ]);
  };
  return {
    /** The sign-in links of one account (an operator names it: `npm run console:link`, or a test). */
    forAccount(accountId: string) {
      const myLinks = accountSlice(links, accountId);
      return {
        /** A new sign-in token (the caller makes it a URL); expired links and sessions are cleared meanwhile. */
        async issueLink(): Promise<{ token: string; expiresAt: Date }> {
          await expireOld();
          const token = secret();
          const now = new Date();
          const expiresAt = new Date(now.getTime() + s.linkTtlMs);
          await myLinks.insertOne({ _id: sha256(token), accountId, createdAt: now, expiresAt, usedAt: null });
          return { token, expiresAt };
        },
      };
    },

    /** Spend a link: a new session for its account, or null when the link is unknown, used or expired. */
    async signIn(token: string): Promise<{ sessionId: string; session: ConsoleSessionDoc } | null> {
      if (!token || token.length > 200) return null;
      const now = new Date();
      const link = await links.findOneAndUpdate(
        { _id: sha256(token), usedAt: null, expiresAt: { $gt: now } },
        { $set: { usedAt: now } },
        { returnDocument: 'after' },
      );
      if (!link) return null;
      const sessionId = secret();
      const session: ConsoleSessionDoc = {
        _id: sha256(sessionId),
        accountId: link.accountId,
        csrf: secret(),
        createdAt: now,
        lastSeenAt: now,
        expiresAt: new Date(now.getTime() + s.sessionTtlMs),
      };
      await sessions.insertOne(session);
      return { sessionId, session };
    },

    /** The live session a cookie value names (extended when last extended over a minute ago), or null. */
    async resume(sessionId: string): Promise<{ session: ConsoleSessionDoc; extended: boolean } | null> {
      if (!sessionId || sessionId.length > 200) return null;
      const now = new Date();
      const session = await sessions.findOne({ _id: sha256(sessionId), expiresAt: { $gt: now } });
      if (!session) return null;
      if (now.getTime() - session.lastSeenAt.getTime() < TOUCH_EVERY_MS) return { session, extended: false };
      const expiresAt = new Date(now.getTime() + s.sessionTtlMs);
      await sessions.updateOne({ _id: session._id }, { $set: { lastSeenAt: now, expiresAt } });
      return { session: { ...session, lastSeenAt: now, expiresAt }, extended: true };
    },

    /** Sign out: the session is deleted, so its cookie is worthless even if kept. */
    async end(sessionId: string): Promise<void> {
      await sessions.deleteOne({ _id: sha256(sessionId) });
    },
  };
}

/** Session settings from the configuration. */
export const sessionSettings = (config: {
  CONSOLE_LINK_TTL_MINUTES: number;
  CONSOLE_SESSION_TTL_HOURS: number;
}): ConsoleSessionSettings => ({
  linkTtlMs: config.CONSOLE_LINK_TTL_MINUTES * 60_000,
  sessionTtlMs: config.CONSOLE_SESSION_TTL_HOURS * 3_600_000,
});

/** Sign-in URLs: what `npm run console:link` prints and the tests open, for the account named by `forAccount`. */
export function createSignInLinks(
  store: Store,
  config: { PUBLIC_BASE_URL: string; CONSOLE_LINK_TTL_MINUTES: number; CONSOLE_SESSION_TTL_HOURS: number },
) {
  const sessions = createConsoleSessions(store, sessionSettings(config));
  const signInUrl = `${config.PUBLIC_BASE_URL.replace(/\/$/, '')}/console/sign-in`;
  return {
    forAccount: (accountId: string) => ({
      /** A new one-time sign-in URL for the account. */
      async issue(): Promise<{ url: string; expiresAt: Date }> {
        const { token, expiresAt } = await sessions.forAccount(accountId).issueLink();
        return { url: `${signInUrl}?token=${encodeURIComponent(token)}`, expiresAt };
      },
    }),
  };
}
