import type {
  Persona,
  PersonaChannel,
  PersonaConversation,
  PersonaConversationStart,
  PersonaCreate,
  PersonaDeployment,
  PersonaDeploymentCreate,
  PersonaEvent,
  PersonaUpdate,
} from '../../contracts/personas';
import type { Authenticated } from '../accounts/accounts';
import { ASSISTANT_TOOL_NAMES } from '../assistant/tools';
import { fromUnits } from '../credits/credits';
import { AppError, notFound } from '../infra/errors';
import { newId, stableId } from '../infra/ids';
import { COLLECTIONS } from '../infra/mongo';
import { mapPage } from '../infra/lists';
import { createLiveSessions } from '../live/sessions';
import { createLiveSessionsRepository } from '../live/sessions.repository';
import type { Runtime } from '../runtime';
import { voiceCatalogue } from '../speech/voices';
import { versionConflict } from '../infra/versioned';
import { toolCallEvent, turnEvent } from './events';
import { FACES, faceById, facePreviewPath } from './faces';
import {
  createPersonasRepository,
  eventSeq,
  type PersonaConversationDoc,
  type PersonaDeploymentDoc,
  type PersonaDoc,
  type PersonaEventDoc,
  type PersonaSnapshotDoc,
} from './personas.repository';

/** The public script a web deployment's pages load (served by api/personas without a key). */
export const EMBED_SCRIPT_PATH = '/persona-embed.js';

const TOOL_NAMES = new Set<string>(ASSISTANT_TOOL_NAMES);
const SNAPSHOT_FIELDS = ['name', 'description', 'instructions', 'voice', 'faceId', 'greeting', 'tools'] as const;
const snapshotOf = (p: PersonaSnapshotDoc): PersonaSnapshotDoc =>
  Object.fromEntries(SNAPSHOT_FIELDS.map((k) => [k, p[k]])) as unknown as PersonaSnapshotDoc;
const iso = (d: Date | null) => (d ? d.toISOString() : null);

/**
 * Personas (SPEC 4.2). The working copy is edited freely (PATCH makes it a draft); publish
 * freezes it as version n in persona_versions, written once and never updated, so deployments
 * and conversations locked to n never see a later edit. A conversation is a live session
 * (platform/live/sessions.ts) opened for the caller with the version's profile locked in the
 * session row (voice, instructions as the system message, greeting as the first assistant turn,
 * tools, and a web deployment's allowed origins); its turns and tool calls are read back from
 * the live session.
 * Length: a factory whose 23 functions share the personas repository, the live sessions and the voice
 * catalogue; the longest, startConversation, is 89 lines.
 */
export function createPersonasService(rt: Pick<Runtime, 'store' | 'config' | 'credits' | 'log'>) {
  const repo = createPersonasRepository(rt.store);
  const sessions = createLiveSessions(rt);
  const sessionRows = createLiveSessionsRepository(rt.store);
  const catalogue = voiceCatalogue(rt.config);
  const api = `${rt.config.PUBLIC_BASE_URL}/api/v1`;

  const view = (p: PersonaDoc): Persona => ({
    id: p._id,
    ...snapshotOf(p),
    status: p.status,
    publishedVersion: p.publishedVersion,
    published: p.published
      ? { ...snapshotOf(p.published), version: p.published.version, publishedAt: p.published.publishedAt.toISOString() }
      : null,
    version: p.version,
    createdAt: p.createdAt.toISOString(),
    updatedAt: p.updatedAt.toISOString(),
  });

  const connectOf = (d: Pick<PersonaDeploymentDoc, '_id' | 'personaId' | 'channel'>): PersonaDeployment['connect'] => {
    const base = {
      conversationsUrl: `${api}/personas/${d.personaId}/conversations`,
      realtimeUrl: sessions.realtimeUrl,
    };
    if (d.channel === 'web') {
      const scriptUrl = `${api}${EMBED_SCRIPT_PATH}`;
      return {
        ...base,
        scriptUrl,
        snippet: `<script src="${scriptUrl}" data-deployment="${d._id}" data-realtime-url="${sessions.realtimeUrl}" data-token="TOKEN_FROM_YOUR_SERVER" async></script>`,
        howTo: `Your server (never the page: it holds your API key) POSTs {"deploymentId":"${d._id}"} to conversationsUrl and puts connect.token of the answer in data-token; the script, on a page of an allowed origin, opens the realtime WebSocket and shows a text chat.`,
      };
    }
    if (d.channel === 'voice') {
      return {
        ...base,
        howTo: `POST {"deploymentId":"${d._id}"} to conversationsUrl, then open connect.realtimeUrl?token=<connect.token> and stream 24 kHz mono s16le PCM (or input_text events); replies come as transcripts, assistant.text and PCM frames.`,
      };
    }
    return {
      ...base,
      howTo: `POST {"deploymentId":"${d._id}"} to conversationsUrl, then open connect.realtimeUrl?token=<connect.token> and send {"type":"input_text","text":…}; read assistant.text events. End with POST …/conversations/{cid}/end.`,
    };
  };

  const deploymentView = (d: PersonaDeploymentDoc): PersonaDeployment => ({
    id: d._id,
    personaId: d.personaId,
    channel: d.channel,
    version: d.version,
    name: d.name,
    allowedOrigins: d.allowedOrigins,
    connect: connectOf(d),
    createdAt: d.createdAt.toISOString(),
  });

  const conversationView = (
    c: PersonaConversationDoc,
    connect: PersonaConversation['connect'] = null,
  ): PersonaConversation => ({
    id: c._id,
    personaId: c.personaId,
    deploymentId: c.deploymentId,
    channel: c.channel,
    version: c.version,
    status: c.status,
    startedAt: c.startedAt.toISOString(),
    endedAt: iso(c.endedAt),
    durationMs: c.durationMs,
    creditsUsed: c.creditsUsed,
    connect,
  });

  const eventView = (e: PersonaEventDoc): PersonaEvent => ({
    id: e._id,
    type: e.type,
    at: e.at.toISOString(),
    text: e.text,
    data: e.data,
  });

  const mustPersona = async (accountId: string, id: string) => {
    const p = await repo.forAccount(accountId).getPersona(id);
    if (!p) throw notFound('persona');
    return p;
  };
  const mustConversation = async (accountId: string, personaId: string, cid: string) => {
    await mustPersona(accountId, personaId);
    const c = await repo.forAccount(accountId).getConversation(personaId, cid);
    if (!c) throw notFound('conversation');
    return c;
  };

  /** 400 naming each field that is not acceptable on the working copy (create and PATCH). */
  const checkFields = (b: Partial<PersonaSnapshotDoc>) => {
    const bad: string[] = [];
    if (b.faceId != null && !faceById(b.faceId))
      bad.push(`faceId: unknown face "${b.faceId.slice(0, 64)}"; GET /personas/faces lists the ${FACES.length} faces`);
    (b.tools ?? []).forEach((t, i) => {
      if (!TOOL_NAMES.has(t))
        bad.push(`tools.${i}: unknown tool "${t.slice(0, 64)}"; one of ${ASSISTANT_TOOL_NAMES.join(', ')}`);
    });
    if (bad.length) throw new AppError('validation_error', bad.slice(0, 10).join('; '));
  };

  /** The turns and tool calls the live session recorded, as events (ids derived from content: importing twice adds nothing). */
  async function importTurns(c: PersonaConversationDoc): Promise<void> {
    const s = await sessionRows.forAccount(c.accountId).turnsOf(c.sessionId);
    const docs: PersonaEventDoc[] = [
      startedEvent(c),
      ...(s?.history ?? []).map((h) => turnEvent(c, h)),
      ...(s?.toolCalls ?? []).map((t) => toolCallEvent(c, t)),
    ];
    await repo.forAccount(c.accountId).addEvents(docs);
  }

  const startedEvent = (c: PersonaConversationDoc) =>
    event(c, 'started', c.startedAt, {
      channel: c.channel,
      version: c.version,
      sessionId: c.sessionId,
      deploymentId: c.deploymentId,
    });
  const event = (
    c: Pick<PersonaConversationDoc, '_id' | 'accountId'>,
    type: 'started' | 'ended',
    at: Date,
    data: Record<string, unknown>,
  ): PersonaEventDoc => ({
    _id: stableId('pev', `${c._id}\n${type}`),
    accountId: c.accountId,
    conversationId: c._id,
    type,
    at,
    seq: eventSeq(type, at),
    text: null,
    data,
  });

  return {
    faces: () => {
      const data = FACES.map((f) => ({
        id: f.id,
        name: f.name,
        description: f.description,
        previewUrl: `${api}${facePreviewPath(f.id)}`,
      }));
      return { data, total: data.length };
    },

    list: async (accountId: string, q: { status?: 'draft' | 'published'; limit: number; cursor?: string }) =>
      mapPage(await repo.forAccount(accountId).pagePersonas(q), view),

    get: async (accountId: string, id: string) => view(await mustPersona(accountId, id)),

    async create(accountId: string, body: PersonaCreate, idFor: (prefix: string) => string): Promise<Persona> {
      const voice = catalogue.resolve(body.voice).name;
      const fields: PersonaSnapshotDoc = {
        name: body.name,
        description: body.description ?? '',
        instructions: body.instructions ?? '',
        voice,
        faceId: body.faceId ?? null,
        greeting: body.greeting ?? '',
        tools: [...new Set(body.tools ?? [])],
      };
      checkFields(fields);
      const now = new Date();
      const doc: PersonaDoc = {
        _id: idFor('per'),
        accountId,
        ...fields,
        status: 'draft',
        publishedVersion: null,
        published: null,
        version: 1,
        createdAt: now,
        updatedAt: now,
      };
      return view(await repo.forAccount(accountId).insertPersona(doc));
    },

    async update(accountId: string, id: string, body: PersonaUpdate, ifMatch: number | undefined): Promise<Persona> {
      const set: Partial<PersonaDoc> = {};
      for (const k of SNAPSHOT_FIELDS) if (body[k] !== undefined) (set as Record<string, unknown>)[k] = body[k];
      if (body.voice !== undefined) set.voice = catalogue.resolve(body.voice).name;
      if (body.tools !== undefined) set.tools = [...new Set(body.tools)];
      checkFields(set);
      // Only the working copy changes: `published` and persona_versions are never touched here.
      set.status = 'draft';
      return view(await repo.forAccount(accountId).updatePersona(id, set, ifMatch));
    },

    async remove(accountId: string, id: string): Promise<void> {
      const r = await repo.forAccount(accountId).deletePersona(id);
      if (!r.deleted) throw notFound('persona');
      // Their tokens stop connecting; the conversations themselves were deleted with the persona.
      await Promise.all(r.activeSessions.map((s) => sessions.setStatus(s, 'ended')));
    },

    async publish(accountId: string, id: string, ifMatch: number | undefined): Promise<Persona> {
      const mine = repo.forAccount(accountId);
      const p = await mustPersona(accountId, id);
      if (ifMatch !== undefined && ifMatch !== p.version) throw versionConflict('persona', p.version, ifMatch);
      const missing: string[] = [];
      if (!p.name.trim()) missing.push('name: required to publish');
      if (!p.instructions.trim()) missing.push('instructions: required to publish');
      if (!p.greeting.trim()) missing.push('greeting: required to publish');
      if (p.faceId === null) missing.push('faceId: required to publish (GET /personas/faces)');
      else if (!faceById(p.faceId)) missing.push(`faceId: unknown face "${p.faceId}"`);
      if (!catalogue.voices.some((v) => v.name === p.voice))
        missing.push(`voice: "${p.voice}" is not a voice of this deployment (GET /speech/voices)`);
      p.tools.forEach((t, i) => {
        if (!TOOL_NAMES.has(t)) missing.push(`tools.${i}: unknown tool "${t}"`);
      });
      if (missing.length) throw new AppError('validation_error', missing.join('; '));
      // Nothing changed since the last publish: that version stands, no new one.
      if (p.status === 'published' && p.published) return view(p);

      const n = (p.publishedVersion ?? 0) + 1;
      const snapshot = snapshotOf(p);
      const publishedAt = new Date();
      const versionId = newId('pver');
      if (!(await mine.insertVersion({ _id: versionId, personaId: id, version: n, snapshot, publishedAt }))) {
        throw new AppError('conflict', 'persona: another publish of it ran at the same time; fetch it again');
      }
      try {
        // Only while the working copy is still the one frozen: a PATCH in between wins (409).
        return view(
          await mine.updatePersona(
            id,
            { status: 'published', publishedVersion: n, published: { ...snapshot, version: n, publishedAt } },
            p.version,
          ),
        );
      } catch (err) {
        await mine.deleteVersion(versionId);
        throw err;
      }
    },

    async listDeployments(accountId: string, personaId: string, q: { limit: number; cursor?: string }) {
      await mustPersona(accountId, personaId);
      return mapPage(await repo.forAccount(accountId).pageDeployments(personaId, q), deploymentView);
    },

    async createDeployment(
      accountId: string,
      personaId: string,
      body: PersonaDeploymentCreate,
      idFor: (prefix: string) => string,
    ): Promise<PersonaDeployment> {
      const p = await mustPersona(accountId, personaId);
      if (p.publishedVersion === null)
        throw new AppError(
          'persona_not_published',
          'persona: it has no published version yet; POST /personas/{id}/publish first',
        );
      const version = body.version ?? p.publishedVersion;
      if (version > p.publishedVersion)
        throw new AppError(
          'validation_error',
          `version: the persona has published versions 1 to ${p.publishedVersion}`,
        );
      const allowedOrigins = body.channel === 'web' ? [...new Set(body.allowedOrigins ?? [])] : [];
      const doc: PersonaDeploymentDoc = {
        _id: idFor('pdep'),
        accountId,
        personaId,
        channel: body.channel,
        version,
        name: body.name ?? `${body.channel} v${version}`,
        allowedOrigins,
        createdAt: new Date(),
      };
      return deploymentView(await repo.forAccount(accountId).insertDeployment(doc));
    },

    async startConversation(
      caller: Authenticated & { requestId: string },
      personaId: string,
      body: PersonaConversationStart,
      idFor: (prefix: string) => string,
    ): Promise<PersonaConversation> {
      const accountId = caller.account._id;
      const mine = repo.forAccount(accountId);
      await mustPersona(accountId, personaId);
      const d = await mine.getDeployment(personaId, body.deploymentId);
      if (!d) throw new AppError('not_found', 'deploymentId: no deployment of this persona has that id');
      // The realtime engine admits only keys with the ai scope: a token it would refuse is not sold.
      if (!caller.key.scopes.includes('ai'))
        throw new AppError(
          'forbidden',
          'a persona conversation is a live session: this key needs the ai scope as well as write',
        );
      const frozen = await mine.getVersion(personaId, d.version);
      if (!frozen) throw notFound('persona version');
      const voice = catalogue.voices.some((v) => v.name === frozen.snapshot.voice)
        ? frozen.snapshot.voice
        : catalogue.default.name;
      const f = frozen.snapshot;
      const convId = idFor('pconv');
      const connectOfLive = (live: { sessionId: string; token: string; expiresAt: string; realtimeUrl: string }) => ({
        sessionId: live.sessionId,
        token: live.token,
        expiresAt: live.expiresAt,
        realtimeUrl: live.realtimeUrl,
        audio: d.channel === 'voice',
      });
      // A retry under the same Idempotency-Key whose first attempt wrote the conversation: the
      // same conversation with a fresh token, charged once.
      const earlier = await mine.getConversation(personaId, convId);
      if (earlier) {
        const again = earlier.status === 'active' ? await sessions.reissue(earlier.sessionId) : null;
        return conversationView(earlier, again ? connectOfLive(again) : null);
      }
      // The charge is delivered by the conversation row: if it is never written, it is refunded.
      const live = await sessions.open(
        { account: caller.account, key: caller.key, requestId: caller.requestId },
        { persona: 'robot', voice },
        {
          persona: {
            personaId,
            version: d.version,
            name: f.name,
            instructions: f.instructions,
            greeting: f.greeting,
            tools: f.tools,
          },
          allowedOrigins: d.channel === 'web' ? d.allowedOrigins : undefined,
          deliveredBy: { collection: COLLECTIONS.personaConversations, id: convId },
        },
      );
      const startedAt = new Date();
      const conv: PersonaConversationDoc = {
        _id: convId,
        accountId,
        personaId,
        deploymentId: d._id,
        channel: d.channel as PersonaChannel,
        version: d.version,
        sessionId: live.sessionId,
        status: 'active',
        creditsUsed: live.charged,
        startedAt,
        endedAt: null,
        durationMs: null,
      };
      try {
        await mine.insertConversation(conv);
      } catch (err) {
        await sessions.setStatus(live.sessionId, 'ended');
        await sessions
          .settleCharge(live.sessionId)
          .catch((e: unknown) =>
            rt.log.warn('persona session hold not settled; the scheduler will', { err: e as Error }),
          );
        throw err;
      }
      await sessions.captureCharge(live.sessionId);
      // The conversation exists: a lost `started` event is written again on the next read.
      await mine
        .addEvents([startedEvent(conv)])
        .catch((err: unknown) =>
          rt.log.warn('persona started event not written; added on read', { err: err as Error }),
        );
      return conversationView(conv, connectOfLive(live));
    },

    async endConversation(accountId: string, personaId: string, cid: string): Promise<PersonaConversation> {
      const mine = repo.forAccount(accountId);
      const c = await mustConversation(accountId, personaId, cid);
      if (c.status === 'ended') return conversationView(c);
      await importTurns(c);
      await sessions.setStatus(c.sessionId, 'ended');
      const s = await sessionRows.forAccount(accountId).spendOf(c.sessionId);
      const endedAt = new Date();
      const durationMs = endedAt.getTime() - c.startedAt.getTime();
      // The session's charge and what its tools kept (live_action, media prices), counted as they ran.
      const creditsUsed = s ? fromUnits(s.spentMillicredits ?? s.charge.millicredits) : c.creditsUsed;
      const after = await mine.endConversation(cid, { endedAt, durationMs, creditsUsed });
      // A concurrent end won: its answer is the one.
      const final = after ?? (await mine.getConversation(personaId, cid));
      if (!final) throw notFound('conversation');
      if (after) await mine.addEvents([event(final, 'ended', endedAt, { durationMs, creditsUsed })]);
      return conversationView(final);
    },

    async listEvents(accountId: string, personaId: string, cid: string, q: { limit: number; cursor?: string }) {
      const c = await mustConversation(accountId, personaId, cid);
      if (c.status === 'active') await importTurns(c);
      return mapPage(await repo.forAccount(accountId).pageEvents(cid, q), eventView);
    },
  };
}
