import { stableId } from '../infra/ids';
import type { LiveHistoryEntry, LiveToolCallEntry } from '../live/sessions.repository';
import type { Runtime } from '../runtime';
import {
  createPersonasRepository,
  eventSeq,
  type PersonaConversationDoc,
  type PersonaEventDoc,
} from './personas.repository';

type Conv = Pick<PersonaConversationDoc, '_id' | 'accountId'>;

/** A turn of the live session as a persona event; the id is derived from content, so writing it twice adds nothing. */
export function turnEvent(c: Conv, h: LiveHistoryEntry): PersonaEventDoc {
  const type = h.role === 'user' ? 'user_turn' : 'assistant_turn';
  const at = new Date(h.at);
  return {
    _id: stableId('pev', `${c._id}\n${type}\n${at.getTime()}\n${h.content}`),
    accountId: c.accountId,
    conversationId: c._id,
    type,
    at,
    seq: eventSeq(type, at),
    text: h.content,
    data: {},
  };
}

/** A tool call of the live session as a persona event (same id rule). */
export function toolCallEvent(c: Conv, t: LiveToolCallEntry): PersonaEventDoc {
  const at = new Date(t.at);
  return {
    _id: stableId('pev', `${c._id}\ntool_call\n${t.callId}\n${at.getTime()}`),
    accountId: c.accountId,
    conversationId: c._id,
    type: 'tool_call',
    at,
    seq: eventSeq('tool_call', at),
    text: t.name,
    data: { name: t.name, callId: t.callId, artifactType: t.type, title: t.title, ok: t.ok },
  };
}

/**
 * What the realtime engine calls as a persona conversation's session records a turn or a tool
 * call: the events are written then, so none depends on the session's capped history (the
 * read-time import stays as the backstop for a write that failed).
 */
export function createPersonaEventsHook(rt: Pick<Runtime, 'store'>) {
  const repo = createPersonasRepository(rt.store);
  /** The conversation of each session, looked up once per session (null: not a persona conversation). */
  const convOf = new Map<string, Promise<Conv | null>>();
  const conv = (s: { _id: string; accountId: string }) => {
    let p = convOf.get(s._id);
    if (!p) {
      p = repo
        .forAccount(s.accountId)
        .getConversationBySession(s._id)
        .then((c) => (c ? { _id: c._id, accountId: c.accountId } : null));
      p.catch(() => convOf.delete(s._id));
      convOf.set(s._id, p);
      if (convOf.size > 10_000) convOf.delete(convOf.keys().next().value!);
    }
    return p;
  };
  return {
    async turns(session: { _id: string; accountId: string }, entries: LiveHistoryEntry[]): Promise<void> {
      const c = await conv(session);
      if (c) await repo.forAccount(c.accountId).addEvents(entries.map((h) => turnEvent(c, h)));
    },
    async toolCall(session: { _id: string; accountId: string }, entry: LiveToolCallEntry): Promise<void> {
      const c = await conv(session);
      if (c) await repo.forAccount(c.accountId).addEvents([toolCallEvent(c, entry)]);
    },
  };
}
