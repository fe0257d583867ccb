import type { LiveClientTool, TurnDetection } from '../../contracts/live';
import { COLLECTIONS, type Store, openStore } from '../infra/mongo';
import { accountSlice } from '../infra/tenant';

export type LiveSessionStatus = 'issued' | 'connected' | 'dropped' | 'ended';

export interface LiveHistoryEntry {
  role: 'user' | 'assistant';
  content: string;
  at: Date;
}

/** A server tool the session ran (or a client tool it asked for), as persona `tool_call` events list them. */
export interface LiveToolCallEntry {
  name: string;
  callId: string;
  /** The artifact's type and title (`error` when it failed). */
  type: string;
  title: string;
  ok: boolean;
  at: Date;
}

/**
 * Who speaks in a persona conversation: a published version, copied into the session row when it
 * opens, so a later publish never changes a conversation under way.
 */
export interface LivePersonaProfile {
  personaId: string;
  version: number;
  name: string;
  instructions: string;
  greeting: string;
  /** The persona's tools (chat catalogue names); the session offers the live actions they map to. */
  tools: string[];
}

/** Which connection carries a session: the API process (instance) and its connection id. */
export interface LiveSessionOwner {
  instance: string;
  conn: string;
}

export interface LiveSessionDoc {
  _id: string;
  accountId: string;
  /** The key that opened it: its scopes bound the session's tools (checked again on connect). */
  keyId: string;
  /** `robot`, or `persona:<personaId>@<version>` for a persona conversation. */
  persona: string;
  /** The persona version that speaks (null for `robot`). */
  profile?: LivePersonaProfile | null;
  /** Set once the persona's greeting was spoken (the first connect only). */
  greeted?: boolean;
  /** A web deployment's allowed origins: the WebSocket upgrade's Origin must be one of them (null: any). */
  allowedOrigins?: string[] | null;
  /** The tool calls of the session, oldest first (the last LIVE_TOOL_CALLS_MAX). */
  toolCalls?: LiveToolCallEntry[];
  /** The connection carrying it now; a newer connect replaces it, and the older one closes (4409). */
  owner?: LiveSessionOwner | null;
  /** Updated every LIVE_HEARTBEAT_MS while connected; the scheduler marks a silent session dropped. */
  lastSeenAt?: Date | null;
  voice: string;
  deviceName: string | null;
  ambient: boolean;
  tools: string[];
  clientTools: LiveClientTool[];
  turnDetection: TurnDetection;
  status: LiveSessionStatus;
  /** The one token that may connect next (single use: cleared when it connects). */
  tokenId: string | null;
  tokenExpiresAt: Date | null;
  /** Generation of the newest resumption handle; only a handle of this generation resumes. */
  handleGen: number;
  handleExpiresAt: Date | null;
  /** The conversation so far (the last LIVE_HISTORY_MAX entries), what a resumed session continues. */
  history: LiveHistoryEntry[];
  /** `millicredits`: integer millicredits (`amount`, decimal credits, before; migrated at startup). */
  charge: { operation: 'live_session'; millicredits: number; holdId: string | null; capturedAt: Date | null };
  /** Millicredits the session cost so far: its charge plus what its server tools kept (live_action and media prices); `spent` (decimal credits) before, migrated at startup. */
  spentMillicredits?: number;
  connections: number;
  /** User turns answered so far (LIVE_SESSION_MAX_TURNS bounds them). */
  turns?: number;
  /** Why it ended, when the realtime engine ended it (`limit`: LIVE_SESSION_MAX_MS or LIVE_SESSION_MAX_TURNS). */
  endedReason?: 'limit' | null;
  createdAt: Date;
  updatedAt: Date;
  endedAt: Date | null;
}

/** History entries kept per session (older ones drop off; the engine sees these). */
export const LIVE_HISTORY_MAX = 40;
/** Tool calls kept per session. */
export const LIVE_TOOL_CALLS_MAX = 100;

const sessionsOf = (store: Store) => openStore(store).db.collection<LiveSessionDoc>(COLLECTIONS.liveSessions);

/**
 * The live sessions' queries. The sessions service (platform/live/sessions.ts) makes every
 * session move through them: each is one conditional update whose filter is the story.
 */
// Length: one method per query of the sessions service (20), each a few lines; splitting them by
// caller would scatter the filters that together make the session's state machine.
export function createLiveSessionsRepository(store: Store) {
  const col = sessionsOf(store);
  return {
    /** Ends a session that is not ended yet, for its time or turn limit. */
    async endForLimit(id: string): Promise<void> {
      const now = new Date();
      await col.updateOne(
        { _id: id, status: { $ne: 'ended' } },
        { $set: { status: 'ended', endedReason: 'limit', endedAt: now, updatedAt: now, tokenId: null } },
      );
    },

    /** One account's sessions: another account's session is not found. */
    forAccount(accountId: string) {
      const mine = accountSlice(col, accountId);
      return {
        /** The account's session. */
        get: (id: string) => mine.findOne({ _id: id }),

        /** The history and tool calls the account's session recorded. */
        turnsOf: (id: string) => mine.findOne({ _id: id }, { projection: { history: 1, toolCalls: 1 } }),

        /** The charge and the running spend of the account's session. */
        spendOf: (id: string) => mine.findOne({ _id: id }, { projection: { charge: 1, spentMillicredits: 1 } }),

        /** What a connecting token is checked against before its claim. */
        gateOf: (id: string) =>
          mine.findOne({ _id: id }, { projection: { status: 1, allowedOrigins: 1, createdAt: 1, turns: 1 } }),

        /** Claims the session for the token `tokenId` (single use), unless it ended; the session after, or null. */
        claimToken: (id: string, tokenId: string, owner: LiveSessionOwner | null) => {
          const now = new Date();
          return mine.findOneAndUpdate(
            { _id: id, tokenId, status: { $ne: 'ended' } },
            {
              $set: { status: 'connected', tokenId: null, updatedAt: now, lastSeenAt: now, owner },
              $inc: { connections: 1 },
            },
            { returnDocument: 'after' },
          );
        },
      };
    },

    /** The session, whoever's. */
    byId: (id: string) => col.findOne({ _id: id }),

    /** The charge of a session. */
    chargeOf: (id: string) => col.findOne({ _id: id }, { projection: { charge: 1 } }),

    /** What a refused turn is explained with. */
    limitsOf: (id: string) => col.findOne({ _id: id }, { projection: { status: 1, createdAt: 1, turns: 1 } }),

    insert: (doc: LiveSessionDoc) => col.insertOne(doc),

    /** The newest token (only it connects); `keyId` when a resume moves the session to another key. */
    async setToken(id: string, t: { tokenId: string; expiresAt: Date }, keyId?: string): Promise<void> {
      await col.updateOne(
        { _id: id },
        {
          $set: {
            tokenId: t.tokenId,
            tokenExpiresAt: t.expiresAt,
            ...(keyId !== undefined ? { keyId } : {}),
            updatedAt: new Date(),
          },
        },
      );
    },

    async markCaptured(id: string): Promise<void> {
      await col.updateOne({ _id: id }, { $set: { 'charge.capturedAt': new Date() } });
    },

    /** Owner and status of sessions, by id. */
    owners: (ids: string[]) => col.find({ _id: { $in: ids } }, { projection: { owner: 1, status: 1 } }).toArray(),

    /** `lastSeenAt` = now on those of the sessions still connected. */
    async seen(ids: string[]): Promise<void> {
      await col.updateMany({ _id: { $in: ids }, status: 'connected' }, { $set: { lastSeenAt: new Date() } });
    },

    /** Counts a turn of a session not ended, created after `since` and under `maxTurns`; null when none matched. */
    countTurn: (id: string, since: Date, maxTurns: number) =>
      col.findOneAndUpdate(
        {
          _id: id,
          status: { $ne: 'ended' },
          createdAt: { $gt: since },
          $or: [{ turns: { $exists: false } }, { turns: { $lt: maxTurns } }],
        },
        { $inc: { turns: 1 } },
        { returnDocument: 'after' },
      ),

    /** Connected sessions not seen since `cutoff` become `dropped`; how many. */
    async dropStale(cutoff: Date): Promise<number> {
      const r = await col.updateMany(
        {
          status: 'connected',
          $or: [{ lastSeenAt: { $lt: cutoff } }, { lastSeenAt: null, updatedAt: { $lt: cutoff } }],
        },
        { $set: { status: 'dropped', owner: null, updatedAt: new Date() } },
      );
      return r.modifiedCount;
    },

    async pushToolCall(doc: Pick<LiveSessionDoc, '_id' | 'accountId'>, entry: LiveToolCallEntry): Promise<void> {
      await col.updateOne(
        { _id: doc._id, accountId: doc.accountId },
        { $push: { toolCalls: { $each: [entry], $slice: -LIVE_TOOL_CALLS_MAX } } },
      );
    },

    async addSpent(id: string, millicredits: number): Promise<void> {
      await col.updateOne({ _id: id }, { $inc: { spentMillicredits: millicredits } });
    },

    /** True for the one caller that claims the greeting. */
    async claimGreeting(id: string): Promise<boolean> {
      const r = await col.updateOne({ _id: id, greeted: false }, { $set: { greeted: true } });
      return r.modifiedCount === 1;
    },

    /** Appends to the history and moves the handle generation; the session after. */
    pushTurn: (doc: Pick<LiveSessionDoc, '_id' | 'accountId'>, entries: LiveHistoryEntry[], expiresAt: Date) =>
      col.findOneAndUpdate(
        { _id: doc._id, accountId: doc.accountId },
        {
          $push: { history: { $each: entries, $slice: -LIVE_HISTORY_MAX } },
          $inc: { handleGen: 1 },
          $set: { handleExpiresAt: expiresAt, updatedAt: new Date() },
        },
        { returnDocument: 'after' },
      ),

    /** `connections`: only if no later connection claimed the session meanwhile. */
    async setStatus(id: string, status: 'dropped' | 'ended', only: { connections?: number } = {}): Promise<void> {
      await col.updateOne(
        {
          _id: id,
          status: { $ne: 'ended' },
          ...(only.connections !== undefined ? { connections: only.connections } : {}),
        },
        {
          $set: {
            status,
            updatedAt: new Date(),
            ...(status === 'ended' ? { endedAt: new Date(), tokenId: null } : {}),
          },
        },
      );
    },
  };
}
