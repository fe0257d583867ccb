import type { Collection, Filter } from 'mongodb';
import type { PersonaChannel, PersonaEventType } from '../../contracts/personas';
import { keysetPage, type Page } from '../infra/lists';
import { COLLECTIONS, isDuplicateKey, onlyDuplicateKeys, type Store, openStore } from '../infra/mongo';
import { updateVersioned } from '../infra/versioned';

/**
 * Personas and what hangs off them (SPEC 4.2). Every call takes the account id: another
 * account's persona, deployment or conversation is simply not found.
 * WARNING: field names are persisted.
 */
export interface PersonaSnapshotDoc {
  name: string;
  description: string;
  instructions: string;
  voice: string;
  faceId: string | null;
  greeting: string;
  tools: string[];
}

export interface PersonaDoc extends PersonaSnapshotDoc {
  _id: string; // per_…
  accountId: string;
  status: 'draft' | 'published';
  publishedVersion: number | null;
  /** A copy of the latest persona_versions row, so a persona reads in one lookup. */
  published: (PersonaSnapshotDoc & { version: number; publishedAt: Date }) | null;
  version: number;
  createdAt: Date;
  updatedAt: Date;
}

/** A published version: written once, never updated (only deleted with its persona). */
export interface PersonaVersionDoc {
  _id: string; // pver_…
  accountId: string;
  personaId: string;
  version: number;
  snapshot: PersonaSnapshotDoc;
  publishedAt: Date;
}

export interface PersonaDeploymentDoc {
  _id: string; // pdep_…
  accountId: string;
  personaId: string;
  channel: PersonaChannel;
  version: number;
  name: string;
  allowedOrigins: string[];
  createdAt: Date;
}

export interface PersonaConversationDoc {
  _id: string; // pconv_…
  accountId: string;
  personaId: string;
  deploymentId: string;
  channel: PersonaChannel;
  version: number;
  /** The live session (live_…) that carries the conversation. */
  sessionId: string;
  status: 'active' | 'ended';
  creditsUsed: number;
  startedAt: Date;
  endedAt: Date | null;
  durationMs: number | null;
}

export interface PersonaEventDoc {
  _id: string; // pev_…
  accountId: string;
  conversationId: string;
  type: PersonaEventType;
  at: Date;
  /** Sort key: at (ms) × 10 + the type's rank, so a user turn and its answer stored in the same millisecond keep their order. */
  seq: number;
  text: string | null;
  data: Record<string, unknown>;
}

const RANK: Record<PersonaEventType, number> = { started: 0, user_turn: 1, assistant_turn: 2, tool_call: 3, ended: 9 };
export const eventSeq = (type: PersonaEventType, at: Date) => at.getTime() * 10 + RANK[type];

export function createPersonasRepository(store: Store) {
  const db = openStore(store);
  const col = <T extends { _id: string }>(name: string) => db.db.collection<T>(name) as unknown as Collection<T>;
  const personas = col<PersonaDoc>(COLLECTIONS.personas);
  const versions = col<PersonaVersionDoc>(COLLECTIONS.personaVersions);
  const deployments = col<PersonaDeploymentDoc>(COLLECTIONS.personaDeployments);
  const conversations = col<PersonaConversationDoc>(COLLECTIONS.personaConversations);
  const events = col<PersonaEventDoc>(COLLECTIONS.personaEvents);

  // The unique (persona, version) index is what makes two concurrent publishes of one persona
  // produce one version n, not two.
  let indexed: Promise<unknown> | undefined;
  const ensureIndexes = () =>
    (indexed ??= Promise.all([
      personas.createIndex({ accountId: 1, createdAt: -1 }),
      versions.createIndex({ personaId: 1, version: 1 }, { unique: true, name: 'persona_version_unique' }),
      deployments.createIndex({ accountId: 1, personaId: 1, createdAt: -1 }),
      conversations.createIndex({ accountId: 1, personaId: 1 }),
      conversations.createIndex({ sessionId: 1 }),
      events.createIndex({ conversationId: 1, seq: 1 }),
    ]).catch((err) => {
      indexed = undefined;
      throw err;
    }));

  return {
    ensureIndexes,
    async insertPersona(doc: PersonaDoc) {
      await ensureIndexes();
      await personas.insertOne(doc);
      return doc;
    },
    getPersona: (accountId: string, id: string) => personas.findOne({ _id: id, accountId }),
    pagePersonas(
      accountId: string,
      q: { status?: 'draft' | 'published'; limit: number; cursor?: string },
    ): Promise<Page<PersonaDoc>> {
      const filter: Filter<PersonaDoc> = { accountId, ...(q.status ? { status: q.status } : {}) };
      return keysetPage(personas, filter, {
        tag: 'personas:createdAt:desc',
        field: 'createdAt',
        direction: -1,
        limit: q.limit,
        cursor: q.cursor,
      });
    },
    updatePersona(accountId: string, id: string, set: Partial<PersonaDoc>, expectedVersion?: number) {
      return updateVersioned(personas, accountId, id, { $set: set }, { expectedVersion, what: 'persona' });
    },
    /** Insert version n; false when that number is taken (a concurrent publish won). */
    async insertVersion(doc: PersonaVersionDoc): Promise<boolean> {
      await ensureIndexes();
      try {
        await versions.insertOne(doc);
        return true;
      } catch (err) {
        if (isDuplicateKey(err)) return false;
        throw err;
      }
    },
    deleteVersion: (id: string) => versions.deleteOne({ _id: id }),
    getVersion: (accountId: string, personaId: string, version: number) =>
      versions.findOne({ accountId, personaId, version }),

    /** The persona first (so nothing new starts on it), then everything that hangs off it. */
    async deletePersona(accountId: string, id: string): Promise<{ deleted: boolean; activeSessions: string[] }> {
      const r = await personas.deleteOne({ _id: id, accountId });
      if (r.deletedCount !== 1) return { deleted: false, activeSessions: [] };
      const convs = await conversations
        .find({ accountId, personaId: id }, { projection: { _id: 1, sessionId: 1, status: 1 } })
        .toArray();
      const convIds = convs.map((c) => c._id);
      if (convIds.length) await events.deleteMany({ accountId, conversationId: { $in: convIds } });
      await Promise.all([
        conversations.deleteMany({ accountId, personaId: id }),
        deployments.deleteMany({ accountId, personaId: id }),
        versions.deleteMany({ accountId, personaId: id }),
      ]);
      return { deleted: true, activeSessions: convs.filter((c) => c.status === 'active').map((c) => c.sessionId) };
    },

    async insertDeployment(doc: PersonaDeploymentDoc) {
      await ensureIndexes();
      await deployments.insertOne(doc);
      return doc;
    },
    getDeployment: (accountId: string, personaId: string, id: string) =>
      deployments.findOne({ _id: id, accountId, personaId }),
    pageDeployments: (accountId: string, personaId: string, q: { limit: number; cursor?: string }) =>
      keysetPage(
        deployments,
        { accountId, personaId },
        { tag: `pdep:${personaId}`, field: 'createdAt', direction: -1, limit: q.limit, cursor: q.cursor },
      ),

    async insertConversation(doc: PersonaConversationDoc) {
      await ensureIndexes();
      await conversations.insertOne(doc);
      return doc;
    },
    getConversation: (accountId: string, personaId: string, id: string) =>
      conversations.findOne({ _id: id, accountId, personaId }),
    /** The conversation a live session belongs to (the realtime engine writes its events as they happen). */
    getConversationBySession: (accountId: string, sessionId: string) => conversations.findOne({ accountId, sessionId }),
    /** active → ended, once; null when it was ended already (the caller reads the stored end). */
    endConversation: (
      accountId: string,
      id: string,
      set: Pick<PersonaConversationDoc, 'endedAt' | 'durationMs' | 'creditsUsed'>,
    ) =>
      conversations.findOneAndUpdate(
        { _id: id, accountId, status: 'active' },
        { $set: { ...set, status: 'ended' } },
        { returnDocument: 'after' },
      ),

    /** Insert events whose ids are not stored yet (ids are derived from content, so a repeat is a no-op). */
    async addEvents(docs: PersonaEventDoc[]): Promise<void> {
      if (!docs.length) return;
      await ensureIndexes();
      const have = new Set(
        (await events.find({ _id: { $in: docs.map((d) => d._id) } }, { projection: { _id: 1 } }).toArray()).map(
          (d) => d._id,
        ),
      );
      const fresh = docs.filter((d) => !have.has(d._id));
      if (!fresh.length) return;
      try {
        await events.insertMany(fresh, { ordered: false });
      } catch (err) {
        if (!onlyDuplicateKeys(err)) throw err;
      }
    },
    pageEvents: (accountId: string, conversationId: string, q: { limit: number; cursor?: string }) =>
      keysetPage(
        events,
        { accountId, conversationId },
        { tag: `pev:${conversationId}`, field: 'seq', direction: 1, limit: q.limit, cursor: q.cursor },
      ),
  };
}
