import type { Conversation, ConversationCreate, ConversationUpdate, Message } from '../../contracts/conversations';
import { createConversationsRepository, type ConversationDoc, type MessageDoc } from './conversations.repository';
import { notFound } from '../infra/errors';
import { mapPage } from '../infra/lists';
import { newId } from '../infra/ids';
import type { Runtime } from '../runtime';

export const toConversation = (c: ConversationDoc): Conversation => ({
  id: c._id,
  title: c.title,
  mode: c.mode,
  messageCount: c.messageCount,
  lastMessageAt: c.lastMessageAt?.toISOString() ?? null,
  version: c.version,
  createdAt: c.createdAt.toISOString(),
  updatedAt: c.updatedAt.toISOString(),
});

export const toMessage = (m: MessageDoc): Message => ({
  id: m._id,
  conversationId: m.conversationId,
  seq: m.seq,
  role: m.role,
  content: m.content,
  artifacts: m.artifacts,
  engine: m.engine,
  usage: m.usage,
  createdAt: m.createdAt.toISOString(),
});

/** /conversations (SPEC 4.6 but POST /chat): validated input in, API shapes out, one account per call. */
export function createConversationsService(rt: Pick<Runtime, 'store'>) {
  const repo = createConversationsRepository(rt.store);

  const mustGet = async (accountId: string, id: string) => {
    const c = await repo.forAccount(accountId).get(id);
    if (!c) throw notFound('conversation');
    return c;
  };

  return {
    repository: repo,

    async list(accountId: string, q: { limit: number; cursor?: string }) {
      const page = await repo.forAccount(accountId).page(q);
      return mapPage(page, toConversation);
    },

    create: async (accountId: string, input: ConversationCreate, idFor: (prefix: string) => string = newId) =>
      toConversation(
        await repo.forAccount(accountId).create({ id: idFor('conv'), title: input.title, mode: input.mode }),
      ),

    get: async (accountId: string, id: string) => toConversation(await mustGet(accountId, id)),

    async update(accountId: string, id: string, patch: ConversationUpdate, ifMatch?: number) {
      const set: { title?: string | null; mode?: ConversationDoc['mode'] } = {};
      if (patch.title !== undefined) set.title = patch.title;
      if (patch.mode !== undefined) set.mode = patch.mode;
      return toConversation(await repo.forAccount(accountId).update(id, set, ifMatch));
    },

    async remove(accountId: string, id: string) {
      if (!(await repo.forAccount(accountId).remove(id))) throw notFound('conversation');
    },

    async messages(accountId: string, id: string, q: { limit: number; cursor?: string }) {
      await mustGet(accountId, id);
      const page = await repo.forAccount(accountId).pageMessages(id, q);
      return mapPage(page, toMessage);
    },
  };
}
