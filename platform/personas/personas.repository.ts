import type { Collection, Filter } from 'mongodb';
import type { PersonaChannel, PersonaEventType } from '../../contracts/personas';
import { keysetPage, type Page } from '../infra/lists';
import { COLLECTIONS, isDuplicateKey, onlyDuplicateKeys, type Store, openStore } from '../infra/mongo';
import { type AccountSlice, accountSlice } from '../infra/tenant';
import { updateVersioned } from '../infra/versioned';

/**
 * Personas and what hangs off them (SPEC 4.2). Every call is made through `forAccount(accountId)`:
 * another account's persona, deployment or conversation is simply not found.
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
    /** One account's personas and what hangs off them: another account's are not found. */
    forAccount(accountId: string) {
      const mine = {
        personas: accountSlice(personas, accountId),
        versions: accountSlice(versions, accountId),
        deployments: accountSlice(deployments, accountId),
        conversations: accountSlice(conversations, accountId),
        events: accountSlice(events, accountId),
      };
      /** Inserts `doc` as the account's (the slice stamps it); the document as stored. */
      const insert = async <T extends { _id: string; accountId: string }>(
        into: AccountSlice<T>,
        doc: Omit<T, 'accountId'>,
      ): Promise<T> => {
        await ensureIndexes();
        const full = { ...doc, accountId } as T;
        await into.insertOne(full as never);
        return full;
      };
      return {
        insertPersona: (doc: Omit<PersonaDoc, 'accountId'>) => insert(mine.personas, doc),
        getPersona: (id: string) => mine.personas.findOne({ _id: id }),
        pagePersonas(q: { status?: 'draft' | 'published'; limit: number; cursor?: string }): Promise<Page<PersonaDoc>> {
          const filter: Filter<PersonaDoc> = q.status ? { status: q.status } : {};
          return keysetPage(mine.personas, filter, {
            tag: 'personas:createdAt:desc',
            field: 'createdAt',
            direction: -1,
            limit: q.limit,
            cursor: q.cursor,
          });
        },
        updatePersona(id: string, set: Partial<PersonaDoc>, expectedVersion?: number) {
          return updateVersioned(mine.personas, accountId, id, { $set: set }, { expectedVersion, what: 'persona' });
        },
        /** Insert version n; false when that number is taken (a concurrent publish won). */
        async insertVersion(doc: Omit<PersonaVersionDoc, 'accountId'>): Promise<boolean> {
          try {
            await insert(mine.versions, doc);
            return true;
          } catch (err) {
            if (isDuplicateKey(err)) return false;
            throw err;
          }
        },
        deleteVersion: (id: string) => mine.versions.deleteOne({ _id: id }),
        getVersion: (personaId: string, version: number) => mine.versions.findOne({ personaId, version }),

        /** The persona first (so nothing new starts on it), then everything that hangs off it. */
        async deletePersona(id: string): Promise<{ deleted: boolean; activeSessions: string[] }> {
          const r = await mine.personas.deleteOne({ _id: id });
          if (r.deletedCount !== 1) return { deleted: false, activeSessions: [] };
          const convs = await mine.conversations
            .find({ personaId: id }, { projection: { _id: 1, sessionId: 1, status: 1 } })
            .toArray();
          const convIds = convs.map((c) => c._id);
          if (convIds.length) await mine.events.deleteMany({ conversationId: { $in: convIds } });
          await Promise.all([
            mine.conversations.deleteMany({ personaId: id }),
            mine.deployments.deleteMany({ personaId: id }),
            mine.versions.deleteMany({ personaId: id }),
          ]);
          return { deleted: true, activeSessions: convs.filter((c) => c.status === 'active').map((c) => c.sessionId) };
        },

        insertDeployment: (doc: Omit<PersonaDeploymentDoc, 'accountId'>) => insert(mine.deployments, doc),
        getDeployment: (personaId: string, id: string) => mine.deployments.findOne({ _id: id, personaId }),
        pageDeployments: (personaId: string, q: { limit: number; cursor?: string }) =>
          keysetPage(
            mine.deployments,
            { personaId },
            { tag: `pdep:${personaId}`, field: 'createdAt', direction: -1, limit: q.limit, cursor: q.cursor },
          ),

        insertConversation: (doc: Omit<PersonaConversationDoc, 'accountId'>) => insert(mine.conversations, doc),
        getConversation: (personaId: string, id: string) => mine.conversations.findOne({ _id: id, personaId }),
        /** The conversation a live session belongs to (the realtime engine writes its events as they happen). */
        getConversationBySession: (sessionId: string) => mine.conversations.findOne({ sessionId }),
        /** active → ended, once; null when it was ended already (the caller reads the stored end). */
        endConversation: (id: string, set: Pick<PersonaConversationDoc, 'endedAt' | 'durationMs' | 'creditsUsed'>) =>
          mine.conversations.findOneAndUpdate(
            { _id: id, status: 'active' },
            { $set: { ...set, status: 'ended' } },
            { returnDocument: 'after' },
          ),

        /** Insert events whose ids are not stored yet (ids are derived from content, so a repeat is a no-op). */
        async addEvents(docs: Omit<PersonaEventDoc, 'accountId'>[]): Promise<void> {
          if (!docs.length) return;
          await ensureIndexes();
          const have = new Set(
            (
              await mine.events.find({ _id: { $in: docs.map((d) => d._id) } }, { projection: { _id: 1 } }).toArray()
            ).map((d) => d._id),
          );
          const fresh = docs.filter((d) => !have.has(d._id));
          if (!fresh.length) return;
          try {
            await mine.events.insertMany(fresh as PersonaEventDoc[], { ordered: false });
          } catch (err) {
            if (!onlyDuplicateKeys(err)) throw err;
          }
        },
        pageEvents: (conversationId: string, q: { limit: number; cursor?: string }) =>
          keysetPage(
            mine.events,
            { conversationId },
            { tag: `pev:${conversationId}`, field: 'seq', direction: 1, limit: q.limit, cursor: q.cursor },
          ),
      };
    },
  };
}
