import { assertSafeKeys } from '../infra/safe-keys';
import type { Collection, Filter } from 'mongodb';
import {
  MessageInput,
  type ChatArtifact,
  type ChatMode,
  type MessageEngine,
  type MessageRole,
  type MessageUsage,
} from '../../contracts/conversations';
import { AppError } from '../infra/errors';
import { newId } from '../infra/ids';
import { keysetPage, type Page } from '../infra/lists';
import { COLLECTIONS, type Store, openStore } from '../infra/mongo';
import { accountSlice } from '../infra/tenant';
import { updateVersioned } from '../infra/versioned';

/**
 * Conversations and their messages (SPEC 2.8, 4.6). A conversation document carries its
 * counters (`messageCount`, `lastSeq`, `lastMessageAt`); each message is its own document with a
 * per-conversation sequence number `seq` (unique per conversation), so the assistant can append
 * turns of any length and listing is exact.
 * WARNING: field names are persisted; add fields, never rename them.
 */
export interface ConversationDoc {
  _id: string; // conv_…
  accountId: string;
  title: string | null;
  mode: ChatMode | null;
  messageCount: number;
  /** The last sequence number handed out (messages are numbered 1, 2, 3…). */
  lastSeq: number;
  lastMessageAt: Date | null;
  /** lastMessageAt, or createdAt while there is no message: the list's "newest activity first" order. */
  activityAt: Date;
  /** Optimistic concurrency of title and mode (appending a message does not change it). */
  version: number;
  createdAt: Date;
  updatedAt: Date;
}

export interface MessageDoc {
  _id: string; // msg_…
  accountId: string;
  conversationId: string;
  seq: number;
  role: MessageRole;
  content: string;
  artifacts: ChatArtifact[];
  engine: MessageEngine | null;
  usage: MessageUsage | null;
  createdAt: Date;
}

/**
 * Every operation on an account's conversations and messages goes through
 * `forAccount(accountId)`: another account's conversation is simply not found.
 */
// Length: almost all of it is forAccount, 8 queries bound to one account id (the tenant filter lives in their
// slices); the longest, appendMessage, is 47 lines. The factory adds the index set-up.
export function createConversationsRepository(store: Store) {
  const db = openStore(store);
  const conversations = db.db.collection<ConversationDoc>(
    COLLECTIONS.conversations,
  ) as unknown as Collection<ConversationDoc>;
  const messages = db.db.collection<MessageDoc>(COLLECTIONS.messages) as unknown as Collection<MessageDoc>;

  // The unique (conversation, seq) index keeps sequence numbers unique even if counters were
  // ever wrong; writes wait for it and a failure is not swallowed (the next write tries again).
  let indexed: Promise<unknown> | undefined;
  const ensureIndexes = () =>
    (indexed ??= Promise.all([
      messages.createIndex({ conversationId: 1, seq: 1 }, { unique: true, name: 'conversation_seq_unique' }),
      messages.createIndex({ accountId: 1, conversationId: 1, seq: 1 }),
      conversations.createIndex({ accountId: 1, activityAt: -1 }),
    ]).catch((err) => {
      indexed = undefined;
      throw err;
    }));

  return {
    ensureIndexes,

    forAccount(accountId: string) {
      const convs = accountSlice(conversations, accountId);
      const msgs = accountSlice(messages, accountId);
      const byId = (id: string) => ({ _id: id }) as Filter<ConversationDoc>;

      return {
        async create(input: { id?: string; title?: string | null; mode?: ChatMode | null }): Promise<ConversationDoc> {
          await ensureIndexes();
          const now = new Date();
          const doc: ConversationDoc = {
            _id: input.id ?? newId('conv'),
            accountId,
            title: input.title ?? null,
            mode: input.mode ?? null,
            messageCount: 0,
            lastSeq: 0,
            lastMessageAt: null,
            activityAt: now,
            version: 1,
            createdAt: now,
            updatedAt: now,
          };
          await convs.insertOne(doc);
          return doc;
        },

        get: (id: string) => convs.findOne(byId(id)),

        /** Newest activity first (last message, else creation), keyset pages. */
        page: (q: { limit: number; cursor?: string }): Promise<Page<ConversationDoc>> =>
          keysetPage(
            convs,
            {},
            {
              tag: 'conversations:activityAt:desc',
              field: 'activityAt',
              direction: -1,
              limit: q.limit,
              cursor: q.cursor,
            },
          ),

        /** Title and/or mode; 404 / 409 version_conflict (If-Match). */
        update: (id: string, set: { title?: string | null; mode?: ChatMode | null }, expectedVersion?: number) =>
          updateVersioned(convs, accountId, id, { $set: set }, { expectedVersion, what: 'conversation' }),

        /** The conversation, then its messages (an append racing with it removes its own message). */
        async remove(id: string): Promise<boolean> {
          if ((await convs.deleteOne(byId(id))).deletedCount !== 1) return false;
          await msgs.deleteMany({ conversationId: id });
          return true;
        },

        /** Oldest first, by sequence number, keyset pages. */
        pageMessages: (conversationId: string, q: { limit: number; cursor?: string }): Promise<Page<MessageDoc>> =>
          keysetPage(
            msgs,
            { conversationId },
            { tag: `messages:${conversationId}`, field: 'seq', direction: 1, limit: q.limit, cursor: q.cursor },
          ),

        /** The newest `limit` messages, oldest first (the history an assistant turn sees). */
        async recentMessages(conversationId: string, limit: number): Promise<MessageDoc[]> {
          const docs = await msgs.find({ conversationId }).sort({ seq: -1 }).limit(limit).toArray();
          return docs.reverse();
        },

        /**
         * Append one message (a user turn, an assistant answer with its artifacts, a tool result):
         * the assistant's entry point. The conversation's counters move in one atomic update
         * (`messageCount` +1, `lastSeq` +1, `lastMessageAt`, `activityAt`), which hands this message
         * its sequence number, so concurrent appends never share or lose one; then the message is
         * stored. 404 not_found when the account has no such conversation; 400 validation_error when
         * the message is malformed. `opts.id` names the message (POST /chat announces the answer's id
         * before it is stored); default a new msg_ id. Not transactional: a process that dies between the two writes
         * leaves a gap in the numbering and a count one too high (the order stays exact); a failed
         * insert gives the count back; a conversation deleted meanwhile takes the message with it.
         */
        async appendMessage(
          conversationId: string,
          message: MessageInput,
          opts: { id?: string } = {},
        ): Promise<MessageDoc> {
          const parsed = MessageInput.safeParse(message);
          if (!parsed.success) {
            const i = parsed.error.issues[0]!;
            const where = ['message', ...i.path.map(String)].join('.');
            throw new AppError(
              'validation_error',
              i.code === 'unrecognized_keys'
                ? `${where}: unknown field ${i.keys.join(', ')}`
                : `${where}: ${i.message}`,
            );
          }
          // Artifacts carry open `data` objects: no field name may reach the database as an operator or path.
          assertSafeKeys({ message: { artifacts: parsed.data.artifacts } });
          await ensureIndexes();
          const now = new Date();
          const conv = await convs.findOneAndUpdate(
            byId(conversationId),
            { $inc: { messageCount: 1, lastSeq: 1 }, $set: { lastMessageAt: now, activityAt: now } },
            { returnDocument: 'after' },
          );
          if (!conv) throw new AppError('not_found', 'conversation not found');
          const doc: MessageDoc = {
            _id: opts.id ?? newId('msg'),
            accountId,
            conversationId,
            seq: conv.lastSeq,
            ...parsed.data,
            createdAt: now,
          };
          try {
            await msgs.insertOne(doc);
          } catch (err) {
            await convs.updateOne(byId(conversationId), { $inc: { messageCount: -1 } }).catch(() => undefined);
            throw err;
          }
          // Deleted meanwhile (after its messages were removed): take this one away too.
          if (!(await convs.findOne(byId(conversationId), { projection: { _id: 1 } }))) {
            await msgs.deleteOne({ _id: doc._id });
            throw new AppError('not_found', 'conversation not found');
          }
          return doc;
        },
      };
    },
  };
}
export type ConversationsRepository = ReturnType<typeof createConversationsRepository>;
