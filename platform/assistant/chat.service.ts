import { CHAT_LIMITS, type ChatJsonResponse, type ChatRequest } from '../../contracts/chat';
import { CONVERSATION_LIMITS } from '../../contracts/conversations';
import type { ChatArtifact, ChatMode, MessageUsage } from '../../contracts/conversations';
import type { AuthAccount } from '../accounts/accounts';
import type { ChatEngine, EngineMessage } from './engine';
import { createChatEngine } from './engines';
import { errorArtifact } from './execute';
import type { ToolDefinition } from './tool';
import { createAssistantTools } from './tools';
import { MAX_STEPS, runTurn } from './turn';
import type { TurnEvent } from './turn-events';
import { createConversationsRepository, type MessageDoc } from '../conversations/conversations.repository';
import { AppError, notFound } from '../infra/errors';
import { newId } from '../infra/ids';
import { COLLECTIONS, type ApiKeyDoc } from '../infra/mongo';
import type { Runtime } from '../runtime';

/** Scopes a key needs, besides `ai`, to continue an existing conversation (POST /chat with conversationId). */
export const CONTINUE_SCOPES = ['read', 'write'] as const;

/** Stored messages an assistant turn sees (the newest ones). */
export const HISTORY_MAX = 40;
/** What a tool round may take on top of the engine's own deadline, for the hold's lifetime. */
const TOOL_ROUND_MS = 120_000;
/** Extra life of the turn's hold past its longest turn, before the scheduler may settle it. */
const HOLD_GRACE_MS = 30_000;

const SYSTEM_PROMPT =
  'You are the assistant of a workspace product. Use the tools to make what the user asks for ' +
  '(flowcharts, whiteboards, notes, documents, presentations, sheets, boards, images, video, music, code builds, research) ' +
  'and then answer briefly, naming what you made. Earlier assistant turns list the artifacts they made, with their ids, ' +
  'so a request about "that flowchart" refers to the newest one.';

/** A new conversation's title: the first user message on one line, at most CHAT_LIMITS.titleMax characters. */
export function titleFrom(content: string): string {
  const oneLine = content.replace(/[\u0000-\u001f\u007f-\u009f\s]+/g, ' ').trim();
  return Array.from(oneLine).slice(0, CHAT_LIMITS.titleMax).join('').trim() || 'Chat';
}

/** The engine's view of a stored message (user and assistant turns; the rest are not replayed). */
function toEngineMessage(m: Pick<MessageDoc, 'role' | 'content' | 'artifacts'>): EngineMessage | null {
  if (m.role === 'user') return { role: 'user', content: m.content };
  if (m.role === 'assistant')
    return { role: 'assistant', content: m.content, ...(m.artifacts.length ? { artifacts: m.artifacts } : {}) };
  return null;
}

export interface ChatCaller {
  account: AuthAccount;
  key: Pick<ApiKeyDoc, 'scopes' | 'folderPins'>;
  requestId: string;
}

export type TurnOutcome =
  | { kind: 'finished'; text: string; artifacts: ChatArtifact[]; usage: MessageUsage; charged: number }
  /** `unreported`: the stream has not said so yet (the answer could not be stored after the engine finished). */
  | { kind: 'failed'; errorText: string; code: string; unreported?: boolean }
  | { kind: 'aborted' };

/**
 * One accepted turn: what `begin` checked and held; `events()` stores the conversation and the
 * user message(s), then runs the turn; `settle()` stores the answer and settles the credits.
 */
export interface ChatTurn {
  conversationId: string;
  mode: ChatMode;
  /** The answer's message id (announced in the stream's start chunk, then stored under it). */
  messageId: string;
  events(signal: AbortSignal): AsyncGenerator<TurnEvent>;
  /** After `events()` ended (or was abandoned): store what finished, capture or release the hold. Never throws. */
  settle(): Promise<TurnOutcome>;
}

/**
 * POST /chat (SPEC 2.7, 4.6). `begin` does everything that can refuse the request, in this
 * order, before any answer is written: a `conversationId` from a key without read and write
 * (403 forbidden: continuing reads the history and appends to it), the conversation (another account's or unknown: 404,
 * nothing charged), the turn's charge as a credit hold (402 insufficient_credits when short:
 * nothing stored). The new conversation (its id minted here) and the user message(s) are stored
 * by `events()`, after the stream's first bytes went out: they cost database round trips that
 * the client need not wait for.
 *
 * Credits: the turn (operation chat_turn) is held when it starts, captured when it finished,
 * released when the engine failed or the client went away before the end; each tool's own
 * service charges and refunds its work (an image, a job), so a turn cut short pays for the tools
 * that finished and for nothing else. The hold names the answer's message (`deliveredBy`): a
 * process that dies after storing the answer leaves a hold the scheduler captures, one that dies
 * before leaves one it releases.
 * Length: a factory of two operations sharing the conversations repository, the engine, the tools and the
 * credits: begin (its own Length line) and complete (43 lines).
 */
export function createChatService(rt: Runtime, opts: { engine?: ChatEngine; tools?: readonly ToolDefinition[] } = {}) {
  const repo = createConversationsRepository(rt.store);
  const engine = opts.engine ?? createChatEngine(rt.config);
  const tools = opts.tools ?? createAssistantTools(rt);
  const { credits, log } = rt;

  // Length: a turn's start: the checks and the credit hold, then the closures the caller runs the turn with
  // (prepare, store, settle 63 lines, events 30 lines), which share the held credits and the turn's ids.
  async function begin(caller: ChatCaller, body: ChatRequest): Promise<ChatTurn> {
    const accountId = caller.account._id;
    const mine = repo.forAccount(accountId);
    if (body.conversationId !== undefined) {
      // Continuing a conversation reads its messages and adds to them: read and write (SPEC §5), checked first.
      const missing = CONTINUE_SCOPES.filter((s) => !caller.key.scopes.includes(s));
      if (missing.length)
        throw new AppError(
          'forbidden',
          `conversationId: continuing a conversation reads its messages and adds to them, which needs the read and write scopes besides ai (SPEC §5); this key lacks ${missing.join(' and ')}. Nothing was stored or charged`,
        );
    }
    const existing = body.conversationId !== undefined ? await mine.get(body.conversationId) : null;
    if (body.conversationId !== undefined && !existing) throw notFound('conversation');
    const mode: ChatMode = body.mode ?? existing?.mode ?? 'fast';
    const messageId = newId('msg');
    const amount = credits.millicreditsFor('chat_turn');
    const maxSteps = MAX_STEPS[mode];
    const hold = await credits.hold({
      accountId,
      operation: 'chat_turn',
      millicredits: amount,
      requestId: caller.requestId,
      ttlMs: maxSteps * (rt.config.CHAT_TIMEOUT_MS + TOOL_ROUND_MS) + HOLD_GRACE_MS,
      deliveredBy: { collection: COLLECTIONS.messages, id: messageId },
    });

    // Named now, created while the turn runs: the stream announces it before anything is written.
    const conversationId = existing?._id ?? newId('conv');
    const incoming = body.message !== undefined ? [{ role: 'user' as const, content: body.message }] : body.messages!;
    // With a conversation its stored history stands: only the new user message is added.
    const toStore = existing ? incoming.slice(-1) : incoming;
    let stored: Promise<void> | undefined;
    let prepared = false;
    /**
     * The history the engine sees, and the writes of the conversation and the user message(s),
     * which go on while the engine works (the answer is stored after them, see settle()). The
     * stored history is read before the new message is written, so it is not seen twice.
     */
    const prepare = async (): Promise<EngineMessage[]> => {
      const past = existing ? await mine.recentMessages(conversationId, HISTORY_MAX) : [];
      stored = (async () => {
        if (!existing)
          await mine.create({
            id: conversationId,
            title: titleFrom(incoming.find((m) => m.role === 'user')!.content),
            mode: body.mode ?? null,
          });
        for (const m of toStore) await mine.appendMessage(conversationId, { role: m.role, content: m.content });
        prepared = true;
      })();
      stored.catch(() => undefined);
      // With a conversation the engine sees its stored history plus what is added to it (the last
      // user message), not the client's copy of the history besides.
      return [...past.map(toEngineMessage).filter((m): m is EngineMessage => m !== null), ...toStore];
    };

    // What the turn produced so far, for settle() whatever way it ends.
    let finish: Extract<TurnEvent, { type: 'turn-finish' }> | undefined;
    let failure: Extract<TurnEvent, { type: 'error' }> | undefined;
    const texts = new Map<string, string>();
    const artifacts: ChatArtifact[] = [];
    /** Tool calls still running when the client left: what they make is kept with the partial answer. */
    const abandoned: Promise<ChatArtifact | null>[] = [];
    const whiteLabel = caller.account.features?.whiteLabel === true;

    async function* events(signal: AbortSignal): AsyncGenerator<TurnEvent> {
      const history = await prepare();
      const turn = runTurn({
        engine,
        tools,
        mode,
        messages: [{ role: 'system', content: SYSTEM_PROMPT }, ...history],
        ctx: { account: caller.account, key: caller.key, requestId: caller.requestId, turnId: messageId },
        signal,
        onAbandonedTool: ({ artifact }) =>
          abandoned.push(
            artifact.then(
              (a) => (a.type === 'error' ? null : a),
              () => null,
            ),
          ),
        onUnexpectedError: (err) =>
          log.error('chat engine failed unexpectedly', { requestId: caller.requestId, err: err as Error }),
      });
      for await (const ev of turn) {
        if (ev.type === 'text-delta') texts.set(ev.id, (texts.get(ev.id) ?? '') + ev.delta);
        else if (ev.type === 'tool-output-available' && artifacts.length < CONVERSATION_LIMITS.artifactsMax - 1)
          artifacts.push(ev.output);
        else if (ev.type === 'turn-finish') finish = ev;
        else if (ev.type === 'error') failure = ev;
        yield ev;
      }
      // A user message that could not be stored fails the turn (its answer would have no place).
      await stored;
    }

    const store = async (content: string, arts: ChatArtifact[], usage: MessageUsage | null) => {
      await mine.appendMessage(
        conversationId,
        { role: 'assistant', content, artifacts: arts, engine: whiteLabel ? null : engine.info, usage },
        { id: messageId },
      );
    };

    let settled: Promise<TurnOutcome> | undefined;
    const settle = () =>
      (settled ??= (async (): Promise<TurnOutcome> => {
        await stored?.catch((err) =>
          log.error('chat user message not stored', { requestId: caller.requestId, err: err as Error }),
        );
        try {
          if (finish && prepared) {
            // Stored first, then captured: a crash between leaves a hold whose message exists (captured by the scheduler).
            if (!(await credits.extend(hold, 60_000)))
              log.warn('chat hold was settled before the turn ended; the turn goes unbilled', {
                requestId: caller.requestId,
              });
            try {
              await store(finish.text, finish.artifacts, finish.usage);
            } catch (err) {
              // Not stored: the turn is not billed, at once (not when the hold expires), and the client is told.
              log.error('chat answer not stored; its hold is released', {
                requestId: caller.requestId,
                err: err as Error,
              });
              await credits.release(hold);
              return {
                kind: 'failed',
                errorText: 'the answer could not be stored',
                code: 'internal_error',
                unreported: true,
              };
            }
            await credits.capture(hold);
            return {
              kind: 'finished',
              text: finish.text,
              artifacts: finish.artifacts,
              usage: finish.usage,
              charged: amount,
            };
          }
          // Released first (the answer is not stored yet, so the hold cannot count as delivered), then what finished is kept.
          await credits.release(hold);
          if (!prepared) return { kind: 'aborted' };
          const partial = [...texts.values()].join('\n\n');
          if (failure) {
            await store(
              partial,
              [...artifacts, errorArtifact('The assistant failed', failure.errorText, { code: failure.code })],
              null,
            );
            return { kind: 'failed', errorText: failure.errorText, code: failure.code };
          }
          // A tool that could not stop mid-call finishes and is paid by its own service: keep what it made.
          const late = (await Promise.all(abandoned)).filter((a): a is ChatArtifact => a !== null);
          if (partial || artifacts.length || late.length) await store(partial, [...artifacts, ...late], null);
          return { kind: 'aborted' };
        } catch (err) {
          log.error('chat turn not settled; the scheduler settles its hold', {
            requestId: caller.requestId,
            err: err as Error,
          });
          return finish
            ? { kind: 'failed', errorText: 'the answer could not be stored', code: 'internal_error' }
            : { kind: 'aborted' };
        }
      })());

    return { conversationId, mode, messageId, events, settle };
  }

  /** stream false: run the turn to its end and assemble ChatJsonResponse. */
  async function complete(
    turn: ChatTurn,
    signal: AbortSignal,
    whiteLabel: boolean,
  ): Promise<ChatJsonResponse & { charged: number }> {
    try {
      for await (const _ of turn.events(signal)) {
        // assembled by settle()
      }
    } catch (err) {
      await turn.settle();
      throw err;
    }
    const outcome = await turn.settle();
    if (outcome.kind === 'failed') {
      throw new AppError(
        outcome.code === 'engine_timeout'
          ? 'timeout'
          : outcome.code === 'internal_error'
            ? 'internal_error'
            : 'service_unavailable',
        `${outcome.errorText}; nothing was charged for this turn`,
      );
    }
    if (outcome.kind === 'aborted')
      throw new AppError(
        'request_timeout',
        'the client went away before the turn finished; nothing was charged for it',
      );
    return {
      conversationId: turn.conversationId,
      mode: turn.mode,
      message: {
        id: turn.messageId,
        role: 'assistant',
        content: outcome.text,
        artifacts: outcome.artifacts,
        engine: whiteLabel ? null : engine.info,
      },
      usage: outcome.usage,
      charged: outcome.charged,
    };
  }

  return { begin, complete, engine };
}
export type ChatService = ReturnType<typeof createChatService>;
