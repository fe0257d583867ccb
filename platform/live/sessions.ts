import {
  LIVE_ACTIONS,
  TurnDetection,
  type LiveAction,
  type LiveCapabilities,
  type LiveSessionRequest,
  type LiveSessionResponse,
} from '../../contracts/live';
import type { AuthAccount } from '../accounts/accounts';
import { fromUnits, type HoldDelivery } from '../credits/credits';
import { AppError } from '../infra/errors';
import { newId } from '../infra/ids';
import { COLLECTIONS, type ApiKeyDoc } from '../infra/mongo';
import type { Runtime } from '../runtime';
import { voiceCatalogue } from '../speech/voices';
import {
  createLiveSessionsRepository,
  type LiveHistoryEntry,
  type LivePersonaProfile,
  type LiveSessionDoc,
  type LiveSessionOwner,
  type LiveToolCallEntry,
} from './sessions.repository';
import { signLiveToken, verifyLiveToken } from './tokens';
import { ASSISTANT_TOOL_OF } from './tools';

/** Path of the realtime engine on the API's HTTP server. */
export const REALTIME_PATH = '/realtime';

export type ConnectRefusal = { code: 4401 | 4403 | 4429; reason: string };

/** Close code and reason of a session past LIVE_SESSION_MAX_MS or LIVE_SESSION_MAX_TURNS. */
export const SESSION_LIMIT_CLOSE = 4429;

/** Whether a session has used up its time or its turns (it is then ended, and cannot be resumed). */
export function sessionLimit(
  config: Pick<Runtime['config'], 'LIVE_SESSION_MAX_MS' | 'LIVE_SESSION_MAX_TURNS'>,
  doc: Pick<LiveSessionDoc, 'createdAt' | 'turns'>,
  now = Date.now(),
): string | null {
  if (doc.createdAt.getTime() + config.LIVE_SESSION_MAX_MS <= now)
    return `session limit reached: a session lasts ${Math.round(config.LIVE_SESSION_MAX_MS / 1000)} s; open a new one`;
  if ((doc.turns ?? 0) >= config.LIVE_SESSION_MAX_TURNS)
    return `session limit reached: a session takes ${config.LIVE_SESSION_MAX_TURNS} turns; open a new one`;
  return null;
}

/** The live action → chat catalogue tool a persona names to be offered it (live-only tools: see personaLiveTools). */
const CATALOGUE_TOOL_OF: Partial<Record<LiveAction, string>> = {
  ...ASSISTANT_TOOL_OF,
  // Live-only reads a persona is offered when it names the platform_action tool.
  list_projects: 'platform_action',
  get_account: 'platform_action',
};

/**
 * The server tools a persona session offers: the live actions whose catalogue tool the persona
 * lists (`platform_action` stands for list_projects and get_account). The memory tools are never
 * offered to a persona: they hold the account owner's own memories, and a persona speaks to
 * visitors through the owner's key.
 */
export function personaLiveTools(personaTools: readonly string[]): LiveAction[] {
  const named = new Set(personaTools);
  return LIVE_ACTIONS.filter((a) => named.has(CATALOGUE_TOOL_OF[a] ?? ''));
}

/** An Origin header as deployments store origins (lowercase scheme://host[:port]); null when not an origin. */
export function normalOrigin(origin: string | undefined): string | null {
  if (!origin) return null;
  try {
    const u = new URL(origin);
    return u.origin === 'null' ? null : u.origin.toLowerCase();
  } catch {
    return null;
  }
}

export function liveCapabilities(config: Runtime['config']): LiveCapabilities {
  return { audioIn: config.LIVE_TRANSCRIPTION_ENGINE !== 'none', textIn: true, audioOut: true };
}

/**
 * Live sessions (SPEC 4.8 POST /live/session): issue and resume, and what the realtime engine
 * asks when a token connects, a turn ends, the connection drops or the client ends it.
 * Length: a factory whose 18 functions share the sessions repository, the token secret and the voice
 * catalogue; the longest, open, is 88 lines.
 */
export function createLiveSessions(rt: Pick<Runtime, 'store' | 'config' | 'credits' | 'log'>) {
  const { config } = rt;
  const sessions = createLiveSessionsRepository(rt.store);
  const secret = config.LIVE_TOKEN_SECRET ?? config.ASSET_SIGNING_SECRET;
  const catalogue = voiceCatalogue(config);
  const realtimeUrl = `${config.PUBLIC_BASE_URL.replace(/^http/, 'ws')}${REALTIME_PATH}`;

  const newToken = async (doc: Pick<LiveSessionDoc, '_id' | 'accountId'>) => {
    const tokenId = newId('ltk');
    const expiresAt = new Date(Date.now() + config.LIVE_TOKEN_TTL_SECONDS * 1000);
    return {
      tokenId,
      expiresAt,
      token: signLiveToken(secret, 'lt', { sid: doc._id, acc: doc.accountId, exp: expiresAt.getTime(), n: tokenId }),
    };
  };

  const response = (
    doc: LiveSessionDoc,
    t: { token: string; expiresAt: Date },
    resumed: boolean,
    charged: number,
  ): LiveSessionResponse => ({
    sessionId: doc._id,
    token: t.token,
    expiresAt: t.expiresAt.toISOString(),
    realtimeUrl,
    persona: doc.persona,
    voice: doc.voice,
    deviceName: doc.deviceName,
    ambient: doc.ambient,
    tools: doc.tools,
    clientTools: doc.clientTools,
    turnDetection: doc.turnDetection,
    capabilities: liveCapabilities(config),
    resumed,
    charged: fromUnits(charged),
  });

  const endForLimit = (id: string) => sessions.endForLimit(id);

  async function resume(
    caller: { account: AuthAccount; key: ApiKeyDoc },
    body: LiveSessionRequest,
    handle: string,
  ): Promise<LiveSessionResponse> {
    const v = verifyLiveToken(secret, 'lh', handle);
    if (!v.ok && v.reason !== 'expired')
      throw new AppError(
        'invalid_resumption_handle',
        'resumptionHandle: not a resumption handle of this service (forged or altered); open a new session without it',
      );
    // An expired handle still names its session: another account's answers 404 before 400.
    const claims = v.ok ? v.claims : JSON.parse(Buffer.from(handle.split('.')[1]!, 'base64url').toString('utf8'));
    const doc =
      claims.acc === caller.account._id ? await sessions.forAccount(caller.account._id).get(String(claims.sid)) : null;
    if (!doc) throw new AppError('not_found', 'resumptionHandle: no session of yours has that handle');
    if (!v.ok)
      throw new AppError('resumption_handle_expired', 'resumptionHandle: expired; open a new session without it');
    if (doc.status === 'ended')
      throw new AppError(
        'session_ended',
        doc.endedReason === 'limit'
          ? 'resumptionHandle: that session reached its time or turn limit; open a new session without it'
          : 'resumptionHandle: that session was ended; open a new session without it',
      );
    if (sessionLimit(config, doc)) {
      await endForLimit(doc._id);
      throw new AppError(
        'session_ended',
        'resumptionHandle: that session reached its time or turn limit; open a new session without it',
      );
    }
    if (v.claims.n !== doc.handleGen)
      throw new AppError(
        'resumption_handle_expired',
        'resumptionHandle: superseded by a newer handle of that session; send the newest one',
      );
    const t = await newToken(doc);
    // Free: the session was paid when it was opened. Only the newest token connects.
    await sessions.setToken(doc._id, t, caller.key._id);
    void body;
    return response(doc, t, true, 0);
  }

  return {
    realtimeUrl,

    /**
     * `persona`: a persona conversation (platform/personas) locks the version's profile in the
     * row: its instructions, greeting and tools; `allowedOrigins`: a web deployment's origins.
     */
    async open(
      caller: { account: AuthAccount; key: ApiKeyDoc; requestId: string },
      body: LiveSessionRequest,
      opts: {
        persona?: LivePersonaProfile;
        allowedOrigins?: string[];
        deliveredBy?: HoldDelivery;
        allowedTools?: readonly LiveAction[];
      } = {},
    ): Promise<LiveSessionResponse> {
      if (body.resumptionHandle !== undefined) return resume(caller, body, body.resumptionHandle);
      const voice = catalogue.resolve(body.voice);
      const ambient = body.ambient ?? false;
      if (ambient && !caller.account.features.proactiveAudio)
        throw new AppError(
          'ambient_not_available',
          'ambient: always-listening sessions need the account feature proactiveAudio, which is off for this account',
        );
      if (ambient && !body.deviceName)
        throw new AppError(
          'validation_error',
          'deviceName: required with ambient (the assistant answers only turns that name it)',
        );
      const now = new Date();
      const _id = newId('live');
      const amount = rt.credits.millicreditsFor('live_session');
      // The hold names the session row, so a crash between its insert and the capture is settled
      // as delivered by the scheduler, and a session that never got its row is refunded.
      // `deliveredBy`: what the caller makes of the session (a persona conversation) is what was
      // sold; the caller captures (captureCharge) or settles (settleCharge) once it wrote it.
      const holdId = await rt.credits.hold({
        accountId: caller.account._id,
        operation: 'live_session',
        millicredits: amount,
        requestId: caller.requestId,
        ttlMs: 60_000,
        deliveredBy: opts.deliveredBy ?? { collection: COLLECTIONS.liveSessions, id: _id },
      });
      const doc: LiveSessionDoc = {
        _id,
        accountId: caller.account._id,
        keyId: caller.key._id,
        persona: opts.persona ? `persona:${opts.persona.personaId}@${opts.persona.version}` : body.persona,
        profile: opts.persona ? { ...opts.persona, tools: [...opts.persona.tools] } : null,
        greeted: !opts.persona?.greeting.trim(),
        allowedOrigins: opts.allowedOrigins?.length ? opts.allowedOrigins.map((o) => normalOrigin(o) ?? o) : null,
        toolCalls: [],
        owner: null,
        lastSeenAt: null,
        voice: voice.name,
        deviceName: body.deviceName ?? null,
        ambient,
        // `allowedTools`: what the opening key's scopes let it call (SPEC §5); the realtime engine checks again on connect.
        tools: (opts.persona
          ? personaLiveTools(opts.persona.tools)
          : body.tools
            ? LIVE_ACTIONS.filter((a) => body.tools!.includes(a))
            : [...LIVE_ACTIONS]
        ).filter((a) => !opts.allowedTools || opts.allowedTools.includes(a)),
        clientTools: [...new Set(body.clientTools ?? [])],
        turnDetection: TurnDetection.parse(body.turnDetection ?? {}),
        status: 'issued',
        tokenId: null,
        tokenExpiresAt: null,
        handleGen: 0,
        handleExpiresAt: null,
        history: [],
        charge: { operation: 'live_session', millicredits: amount, holdId, capturedAt: null },
        spentMillicredits: amount,
        connections: 0,
        turns: 0,
        endedReason: null,
        createdAt: now,
        updatedAt: now,
        endedAt: null,
      };
      const t = await newToken(doc);
      doc.tokenId = t.tokenId;
      doc.tokenExpiresAt = t.expiresAt;
      try {
        await sessions.insert(doc);
      } catch (err) {
        await rt.credits.settle(holdId);
        throw err;
      }
      if (!opts.deliveredBy) await this.captureCharge(_id);
      return response(doc, t, false, amount);
    },

    /** The session's charge is kept: its hold is captured (a failure is left to the scheduler's settle). */
    async captureCharge(id: string): Promise<void> {
      const doc = await sessions.chargeOf(id);
      if (!doc?.charge.holdId) return;
      const holdId = doc.charge.holdId;
      await rt.credits
        .capture(holdId)
        .catch((err: unknown) =>
          rt.log.warn('live session hold not captured; the scheduler will', { holdId, err: err as Error }),
        );
      await sessions.markCaptured(id);
    },

    /** The caller could not write what the session was for: its hold is settled (refunded when that is missing). */
    async settleCharge(id: string): Promise<void> {
      const doc = await sessions.chargeOf(id);
      if (doc?.charge.holdId) await rt.credits.settle(doc.charge.holdId);
    },

    /** A fresh single-use token for a session (an idempotent retry of the request that opened it). */
    async reissue(id: string): Promise<LiveSessionResponse | null> {
      const doc = await sessions.byId(id);
      if (!doc || doc.status === 'ended') return null;
      const t = await newToken(doc);
      await sessions.setToken(id, t);
      return response(doc, t, false, doc.charge.millicredits);
    },

    /**
     * A token connects: verified, then claimed in one conditional update (single use; a token of
     * an ended session, or one superseded by a newer token, is refused). A web deployment's
     * session is refused before the claim when `origin` is not one of its allowed origins, so a
     * page elsewhere does not use the token up. The claim records `owner`: a connection of
     * another process that carried the session sees it on its next heartbeat and closes (4409).
     */
    async connect(
      token: string,
      at: { origin?: string; owner?: LiveSessionOwner } = {},
    ): Promise<{ ok: true; doc: LiveSessionDoc } | { ok: false; refusal: ConnectRefusal }> {
      const v = verifyLiveToken(secret, 'lt', token);
      if (!v.ok)
        return {
          ok: false,
          refusal: { code: 4401, reason: v.reason === 'expired' ? 'token expired' : 'token invalid' },
        };
      const mine = sessions.forAccount(v.claims.acc);
      const known = await mine.gateOf(v.claims.sid);
      if (known?.allowedOrigins?.length) {
        const origin = normalOrigin(at.origin);
        if (!origin || !known.allowedOrigins.includes(origin))
          return {
            ok: false,
            refusal: {
              code: 4403,
              reason: origin
                ? 'origin not allowed for this deployment'
                : 'a web deployment connects only from a page of an allowed origin (Origin header missing)',
            },
          };
      }
      const limit = known && known.status !== 'ended' ? sessionLimit(config, known) : null;
      if (limit) {
        await endForLimit(known!._id);
        return { ok: false, refusal: { code: SESSION_LIMIT_CLOSE, reason: limit } };
      }
      const doc = await mine.claimToken(v.claims.sid, String(v.claims.n), at.owner ?? null);
      if (doc) return { ok: true, doc };
      return {
        ok: false,
        refusal: {
          code: 4403,
          reason: known?.status === 'ended' ? 'session ended' : 'token already used or superseded',
        },
      };
    },

    /**
     * The heartbeat of one API process, batched: `lastSeenAt` of the sessions its connections
     * still own moves on; the connection ids another connection took over are answered (their
     * process closes them with 4409).
     */
    async heartbeat(
      instance: string,
      conns: { sessionId: string; conn: string }[],
    ): Promise<{ lost: string[]; ended: string[] }> {
      if (!conns.length) return { lost: [], ended: [] };
      const rows = await sessions.owners(conns.map((c) => c.sessionId));
      const byId = new Map(rows.map((r) => [r._id, r]));
      const lost: string[] = [];
      const ended: string[] = [];
      const mine: string[] = [];
      for (const c of conns) {
        const r = byId.get(c.sessionId);
        // Ended elsewhere (a persona conversation ended, its persona deleted): the connection closes.
        if (!r || r.status === 'ended') ended.push(c.conn);
        // Rows without an owner (claimed before owners were recorded) stay with whoever has them.
        else if (r.owner && (r.owner.instance !== instance || r.owner.conn !== c.conn)) lost.push(c.conn);
        else mine.push(c.sessionId);
      }
      if (mine.length) await sessions.seen(mine);
      return { lost, ended };
    },

    /**
     * Before each user turn: counts it, unless the session was ended meanwhile (`ended`) or is
     * past its time or turn limit (`limit`: the session is ended, with the reason).
     */
    async claimTurn(id: string): Promise<{ ok: true } | { ok: false; ended: true } | { ok: false; limit: string }> {
      const since = new Date(Date.now() - config.LIVE_SESSION_MAX_MS);
      const r = await sessions.countTurn(id, since, config.LIVE_SESSION_MAX_TURNS);
      if (r) return { ok: true };
      const row = await sessions.limitsOf(id);
      if (!row || row.status === 'ended') return { ok: false, ended: true };
      await endForLimit(id);
      return { ok: false, limit: sessionLimit(config, row) ?? 'session limit reached; open a new one' };
    },

    endForLimit,

    /** Sessions `connected` whose process stopped heart-beating before `cutoff` become `dropped` (the scheduler). */
    dropStale: (cutoff: Date): Promise<number> => sessions.dropStale(cutoff),

    /** A tool call of the session (persona `tool_call` events read them). */
    async recordToolCall(doc: Pick<LiveSessionDoc, '_id' | 'accountId'>, entry: LiveToolCallEntry): Promise<void> {
      await sessions.pushToolCall(doc, entry);
    },

    /** Millicredits a server tool of the session kept (the running `spentMillicredits`). */
    async addSpent(id: string, millicredits: number): Promise<void> {
      if (millicredits > 0) await sessions.addSpent(id, millicredits);
    },

    /** The greeting is spoken once per session: true for the one connection that claims it. */
    claimGreeting: (id: string): Promise<boolean> => sessions.claimGreeting(id),

    /** After a turn: the history grows, and a new resumption handle (the only valid one) is made. */
    async recordTurn(doc: Pick<LiveSessionDoc, '_id' | 'accountId'>, entries: LiveHistoryEntry[]): Promise<string> {
      const expiresAt = new Date(Date.now() + config.LIVE_RESUME_TTL_SECONDS * 1000);
      const after = await sessions.pushTurn(doc, entries, expiresAt);
      return signLiveToken(secret, 'lh', {
        sid: doc._id,
        acc: doc.accountId,
        exp: expiresAt.getTime(),
        n: after?.handleGen ?? 0,
      });
    },

    /** A handle for the session as it stands (sent at session.started). */
    async handle(doc: Pick<LiveSessionDoc, '_id' | 'accountId'>): Promise<string> {
      return this.recordTurn(doc, []);
    },

    /** `connections`: only if no later connection claimed the session meanwhile. */
    async setStatus(id: string, status: 'dropped' | 'ended', only: { connections?: number } = {}) {
      await sessions.setStatus(id, status, only);
    },
  };
}
