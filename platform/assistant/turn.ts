import { CONVERSATION_LIMITS, type ChatArtifact, type ChatMode } from '../../contracts/conversations';
import { stableId } from '../infra/ids';
import { EngineError, type ChatEngine, type EngineMessage, type ToolCall } from './engine';
import { errorArtifact, executeToolCall, toolSpecs, toolsFor } from './execute';
import type { ToolContext, ToolDefinition } from './tool';
import type { TurnEvent } from './turn-events';

/**
 * Engine steps per turn, by mode (SPEC 2.7 modes). A step is one engine call: it may ask for
 * tools, whose results feed the next step.
 * - fast: 3 steps: one round of tools, the reply, and one spare round (a tool that failed, a
 *   follow-up the results call for).
 * - think: 6 steps: the engine may plan further and chain tools, each round seeing what the
 *   previous made (research, then notes summarising the plan; a deck, then its theme).
 * The last step is offered no tools, so a turn always ends with a reply rather than with a tool
 * result nobody explained.
 */
export const MAX_STEPS: Readonly<Record<ChatMode, number>> = { fast: 3, think: 6 };

/**
 * Tool calls that run per step and per turn. The calls past either are not run: each is answered
 * with a `tool_call_limit` error artifact (the engine and the UI see it). A turn's artifacts are
 * stored with its answer, which holds at most CONVERSATION_LIMITS.artifactsMax of them; two
 * places stay free (the failure and an abandoned tool's late artifact, see api/chat).
 */
export const MAX_TOOL_CALLS_PER_STEP = 8;
export const MAX_TOOL_CALLS_PER_TURN = 40;
const ARTIFACTS_KEPT = CONVERSATION_LIMITS.artifactsMax - 2;

export interface TurnInput {
  engine: ChatEngine;
  tools: readonly ToolDefinition[];
  /** The history the engine sees, oldest first, ending with the new user message. Not modified. */
  messages: readonly EngineMessage[];
  mode: ChatMode;
  /**
   * Who the tools act for. `turnId` (the answer's message id, or an agent run's id) seeds the ids
   * the tools make, with the step and the call: the same turn, step and call make the same ids,
   * so a call replayed after a crash finds what it made.
   */
  ctx: Omit<ToolContext, 'idFor' | 'signal'> & { turnId: string; signal?: AbortSignal };
  /** Aborted when the client went away: the engine and running tools stop, no event follows. */
  signal?: AbortSignal;
  /** Default MAX_STEPS[mode]. */
  maxSteps?: number;
  /**
   * Told of a tool call that was running when the signal aborted: the turn ends at once, the call
   * goes on until the tool stops (or finishes, if it cannot stop mid-call) and `artifact` settles
   * then (an `error` artifact, or a rejection, when it stopped).
   */
  onAbandonedTool?(call: { toolCallId: string; toolName: string; artifact: Promise<ChatArtifact> }): void;
  /** Told of an engine failure that was not an EngineError (a bug), before its `error` event. */
  onUnexpectedError?(err: unknown): void;
}

const sum = (a: number | null, b: number | null) => (a === null ? b : b === null ? a : a + b);

/**
 * One assistant turn: step the engine, run the tools it asks for, feed their artifacts back,
 * until a step asks for no tool or the mode's step limit is reached. Yields TurnEvents in the
 * order a UI-message stream sends them; `turn-finish` comes last when the turn completed.
 *
 * Endings: a completed turn ends with `turn-finish`; an engine failure (EngineError: provider
 * error or timeout) yields one `error` event and ends (no `turn-finish`): the caller reports it
 * and gives the turn's credits back; an abort ends at once with no further event (tools in
 * flight get the signal). Tools run one after another in the order the engine asked, so an
 * abort leaves later tools unrun.
 *
 * Tool-call ids in the events are the UI's (unique per turn: the provider's id, suffixed when a
 * provider reused it in an earlier step); the engine's messages keep the provider's ids.
 * Length: one async generator: the loop over engine steps yields events while the messages, artifacts and
 * texts it gathers live across the yields; its inner helpers are short (at most 9 lines).
 */
export async function* runTurn(input: TurnInput): AsyncGenerator<TurnEvent, void, undefined> {
  const { engine, tools, mode } = input;
  const signal = input.signal ?? input.ctx.signal ?? new AbortController().signal;
  const maxSteps = Math.max(1, input.maxSteps ?? MAX_STEPS[mode]);
  const { turnId, signal: _ctxSignal, ...toolCtx } = input.ctx;
  // The engine is offered only what the key may call (SPEC §5); a call of another tool is refused
  // by executeToolCall with a `forbidden` error artifact the engine reads.
  const specs = toolSpecs(toolsFor(tools, input.ctx.key.scopes));
  const aborted = new Promise<undefined>((resolve) => {
    if (signal.aborted) resolve(undefined);
    else signal.addEventListener('abort', () => resolve(undefined), { once: true });
  });
  const messages: EngineMessage[] = [...input.messages];
  const artifacts: ChatArtifact[] = [];
  const texts: string[] = [];
  let usage: { inputTokens: number | null; outputTokens: number | null } = { inputTokens: null, outputTokens: null };
  let textParts = 0;
  let ran = 0;
  // UI toolCallIds are unique per turn: providers may reuse call ids from step to step (call_0
  // every step), and a UI message keys its tool parts by id. The engine keeps its own ids.
  const uiIdsUsed = new Set<string>();

  for (let stepIndex = 0; stepIndex < maxSteps; stepIndex++) {
    if (signal.aborted) return;
    yield { type: 'step-start' };
    let openText: string | undefined;
    let stepText = '';
    const calls: ToolCall[] = [];
    /** Provider call id → its UI id and tool name, for the calls this step started. */
    const started = new Map<string, { uiId: string; toolName: string }>();
    const start = (id: string, toolName: string): { first: boolean; uiId: string } => {
      const known = started.get(id);
      if (known) return { first: false, uiId: known.uiId };
      let uiId = id;
      for (let n = 1; uiIdsUsed.has(uiId); n++) uiId = `${id}-s${stepIndex}${n > 1 ? `-${n}` : ''}`;
      uiIdsUsed.add(uiId);
      started.set(id, { uiId, toolName });
      return { first: true, uiId };
    };
    const closeText = function* (): Generator<TurnEvent> {
      if (openText === undefined) return;
      yield { type: 'text-end', id: openText };
      openText = undefined;
    };

    const lastStep = stepIndex === maxSteps - 1;
    try {
      for await (const ev of engine.step({ messages, tools: lastStep ? [] : specs, mode, stepIndex, signal })) {
        if (signal.aborted) return;
        switch (ev.type) {
          case 'text-delta':
            if (!ev.delta) break;
            if (openText === undefined) {
              openText = `${turnId}-text-${textParts++}`;
              yield { type: 'text-start', id: openText };
            }
            stepText += ev.delta;
            yield { type: 'text-delta', id: openText, delta: ev.delta };
            break;
          case 'tool-call-start': {
            yield* closeText();
            const s = start(ev.id, ev.name);
            if (s.first) yield { type: 'tool-input-start', toolCallId: s.uiId, toolName: ev.name };
            break;
          }
          case 'tool-call': {
            yield* closeText();
            const { call } = ev;
            const s = start(call.id, call.name);
            if (s.first) yield { type: 'tool-input-start', toolCallId: s.uiId, toolName: call.name };
            // The validated arguments when they pass (defaults filled in), else what the engine sent:
            // the tool's output then says what was wrong with them.
            const parsed = tools.find((t) => t.name === call.name)?.input.safeParse(call.args ?? {});
            yield {
              type: 'tool-input-available',
              toolCallId: s.uiId,
              toolName: call.name,
              input: parsed?.success ? parsed.data : (call.args ?? {}),
            };
            calls.push(call);
            break;
          }
          case 'usage':
            usage = {
              inputTokens: sum(usage.inputTokens, ev.inputTokens),
              outputTokens: sum(usage.outputTokens, ev.outputTokens),
            };
            break;
        }
      }
    } catch (err) {
      if (signal.aborted) return;
      yield* closeText();
      if (!(err instanceof EngineError)) input.onUnexpectedError?.(err);
      const e =
        err instanceof EngineError
          ? err
          : new EngineError('the assistant failed unexpectedly; nothing was charged for this turn', 'engine_error');
      // Tool parts this step opened never run: close them, so no UI part stays in input-streaming.
      for (const { uiId, toolName } of started.values())
        yield { type: 'tool-output-error', toolCallId: uiId, toolName, errorText: `not run: ${e.message}` };
      yield { type: 'error', errorText: e.message, code: e.code };
      return;
    }
    yield* closeText();
    if (stepText) texts.push(stepText);
    messages.push({ role: 'assistant', content: stepText, ...(calls.length ? { toolCalls: calls } : {}) });

    for (const [i, call] of calls.entries()) {
      if (signal.aborted) return;
      const uiId = started.get(call.id)!.uiId;
      const keep = (artifact: ChatArtifact) => {
        if (artifacts.length < ARTIFACTS_KEPT) artifacts.push(artifact);
        messages.push({ role: 'tool', toolCallId: call.id, name: call.name, artifact });
        return { type: 'tool-output-available' as const, toolCallId: uiId, toolName: call.name, output: artifact };
      };
      if (i >= MAX_TOOL_CALLS_PER_STEP || ran >= MAX_TOOL_CALLS_PER_TURN) {
        const why =
          i >= MAX_TOOL_CALLS_PER_STEP
            ? `at most ${MAX_TOOL_CALLS_PER_STEP} tool calls run per step`
            : `at most ${MAX_TOOL_CALLS_PER_TURN} tool calls run per turn`;
        yield keep(
          errorArtifact(`Not run: ${call.name}`, `${why}; ${call.name} was not run and nothing was charged for it`, {
            tool: call.name,
            code: 'tool_call_limit',
          }),
        );
        continue;
      }
      ran++;
      // Ids for what this call makes, stable per (turn, step, call): the nth id of a prefix is the
      // same on a replay, and a provider that reuses call ids across steps still gets new ones.
      const counts = new Map<string, number>();
      const idFor = (prefix: string) => {
        const n = counts.get(prefix) ?? 0;
        counts.set(prefix, n + 1);
        return stableId(prefix, `${turnId}\n${stepIndex}\n${call.id}${n ? `\n${n}` : ''}`);
      };
      // The last step offered no tools: a call it makes anyway is answered as an unknown tool.
      const running = executeToolCall(lastStep ? [] : tools, call, { ...toolCtx, signal, idFor });
      // On abort the turn ends at once; a tool that cannot stop mid-call finishes on its own and
      // its service settles what it charged.
      const outcome = await Promise.race([
        running.then(
          (artifact) => ({ artifact }),
          (err: unknown) => ({ err }),
        ),
        aborted,
      ]);
      if (signal.aborted || !outcome) {
        running.catch(() => undefined);
        input.onAbandonedTool?.({ toolCallId: uiId, toolName: call.name, artifact: running });
        return;
      }
      if ('err' in outcome) throw outcome.err;
      yield keep(outcome.artifact);
    }
    yield { type: 'step-finish' };
    if (!calls.length) {
      yield {
        type: 'turn-finish',
        text: texts.join('\n\n'),
        artifacts,
        engine: engine.info,
        usage,
        steps: stepIndex + 1,
      };
      return;
    }
  }
  yield { type: 'turn-finish', text: texts.join('\n\n'), artifacts, engine: engine.info, usage, steps: maxSteps };
}
