import { createParser, type EventSourceMessage } from 'eventsource-parser';
import type { ChatArtifact } from '../../../contracts/conversations';
import {
  EngineError,
  type ChatEngine,
  type EngineEvent,
  type EngineInfo,
  type EngineMessage,
  type StepInput,
  type ToolSpec,
} from '../engine';

export interface OpenAIEngineOptions {
  /** e.g. https://api.openai.com/v1; `/chat/completions` is appended. */
  baseUrl: string;
  apiKey?: string;
  model: string;
  /** One step, request sent to last byte read (CHAT_TIMEOUT_MS). */
  timeoutMs: number;
  fetch?: typeof fetch;
}

/** What the provider is sent (the chat-completions request, streamed). */
type WireMessage =
  | { role: 'system' | 'user'; content: string }
  | {
      role: 'assistant';
      content: string | null;
      tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
    }
  | { role: 'tool'; tool_call_id: string; content: string };

/** One `chat.completion.chunk` as far as it is read. */
interface Chunk {
  choices?: {
    index?: number;
    delta?: {
      content?: string | null;
      tool_calls?: { index?: number; id?: string; type?: string; function?: { name?: string; arguments?: string } }[];
    };
    finish_reason?: string | null;
  }[];
  usage?: { prompt_tokens?: number; completion_tokens?: number } | null;
  error?: { message?: string };
}

/** At most this much of a provider's own error message reaches the user. */
const SNIPPET = 120;

/** An earlier turn's artifacts as a line the model can read ("that flowchart" → its projectId). */
function summarise(artifacts: readonly ChatArtifact[]): string {
  const items = artifacts.map(
    (a) =>
      `${a.type} "${a.title}"${a.projectId ? ` (projectId ${a.projectId})` : ''}${a.openUrl ? ` ${a.openUrl}` : ''}`,
  );
  return `[Made in this turn: ${items.join('; ')}]`;
}

export function toWireMessages(messages: readonly EngineMessage[]): WireMessage[] {
  return messages.map((m): WireMessage => {
    switch (m.role) {
      case 'system':
      case 'user':
        return { role: m.role, content: m.content };
      case 'assistant': {
        const content = m.artifacts?.length
          ? `${m.content}${m.content ? '\n\n' : ''}${summarise(m.artifacts)}`
          : m.content;
        if (!m.toolCalls?.length) return { role: 'assistant', content };
        return {
          role: 'assistant',
          content: content || null,
          tool_calls: m.toolCalls.map((c) => ({
            id: c.id,
            type: 'function',
            function: { name: c.name, arguments: typeof c.args === 'string' ? c.args : JSON.stringify(c.args ?? {}) },
          })),
        };
      }
      case 'tool':
        return { role: 'tool', tool_call_id: m.toolCallId, content: JSON.stringify(m.artifact) };
    }
    // Unreachable: the cases above cover every role the type allows.
    throw new Error(`unknown message role: ${(m as { role: string }).role}`);
  });
}

const toWireTools = (tools: readonly ToolSpec[]) =>
  tools.map((t) => ({
    type: 'function' as const,
    function: { name: t.name, description: t.description, parameters: t.parameters },
  }));

/**
 * An OpenAI-compatible chat-completions provider, streamed: POST {base}/chat/completions with
 * `stream: true` and `stream_options.include_usage`, read as SSE (eventsource-parser). Text
 * deltas pass through as they arrive; tool calls are assembled by `index` (id and name come in
 * their first chunk, `arguments` in pieces) and yielded when the stream ends. Arguments that are
 * not valid JSON are passed on as the raw string: the tool's validation then answers an error
 * artifact the model sees, and the turn goes on (one bad call does not end the turn).
 *
 * Errors: a status other than 200 → EngineError engine_unavailable ("the assistant provider
 * answered <status>" and at most 120 characters of the provider's own error message, the key
 * masked); no answer or a stream cut before its end → engine_unavailable; the step not finished
 * within `timeoutMs` → engine_timeout. The caller's signal aborts the request at once.
 * Length: the engine is one method, step (142 lines): one streamed request whose timeout, abort and stream
 * reading share its controller and the tool calls being assembled; the factory adds the error mapping.
 */
export function createOpenAIEngine(opts: OpenAIEngineOptions): ChatEngine {
  const doFetch = opts.fetch ?? fetch;
  const base = opts.baseUrl.replace(/\/+$/, '');
  const info: EngineInfo = {
    assistantName: 'svc assistant',
    lab: 'openai-compatible',
    labName: new URL(base).host,
    model: opts.model,
  };
  const mask = (s: string) => (opts.apiKey ? s.split(opts.apiKey).join('[key]') : s);

  async function failure(res: Response): Promise<EngineError> {
    let detail = '';
    try {
      const body = (await res.text()).slice(0, 4096);
      const parsed = JSON.parse(body) as { error?: { message?: unknown } | string; message?: unknown };
      const msg =
        typeof parsed.error === 'string'
          ? parsed.error
          : typeof parsed.error?.message === 'string'
            ? parsed.error.message
            : typeof parsed.message === 'string'
              ? parsed.message
              : '';
      detail = mask(msg.replace(/\s+/g, ' ').trim()).slice(0, SNIPPET);
    } catch {
      // Not JSON (an HTML error page): the status says enough.
    }
    return new EngineError(
      `the assistant provider answered ${res.status}${detail ? `: ${detail}` : ''}`,
      'engine_unavailable',
    );
  }

  return {
    info,
    async *step(input: StepInput): AsyncGenerator<EngineEvent> {
      input.signal.throwIfAborted();
      const ctrl = new AbortController();
      let timedOut = false;
      const onAbort = () => ctrl.abort(input.signal.reason);
      input.signal.addEventListener('abort', onAbort, { once: true });
      const timer = setTimeout(() => {
        timedOut = true;
        ctrl.abort();
      }, opts.timeoutMs);
      const fail = (err: unknown): unknown => {
        if (input.signal.aborted) return input.signal.reason ?? err;
        if (timedOut)
          return new EngineError(`the assistant provider did not finish within ${opts.timeoutMs} ms`, 'engine_timeout');
        if (err instanceof EngineError) return err;
        return new EngineError('the assistant provider could not be reached', 'engine_unavailable');
      };

      try {
        const body = {
          model: opts.model,
          stream: true,
          stream_options: { include_usage: true },
          messages: toWireMessages(input.messages),
          ...(input.tools.length ? { tools: toWireTools(input.tools), tool_choice: 'auto' } : {}),
        };
        let res: Response;
        try {
          res = await doFetch(`${base}/chat/completions`, {
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              accept: 'text/event-stream',
              ...(opts.apiKey ? { authorization: `Bearer ${opts.apiKey}` } : {}),
            },
            body: JSON.stringify(body),
            signal: ctrl.signal,
          });
        } catch (err) {
          throw fail(err);
        }
        if (res.status !== 200) {
          const e = await failure(res).catch(
            () => new EngineError(`the assistant provider answered ${res.status}`, 'engine_unavailable'),
          );
          throw fail(e);
        }
        if (!res.body)
          throw fail(new EngineError('the assistant provider answered without a body', 'engine_unavailable'));

        const pending: EventSourceMessage[] = [];
        const parser = createParser({ onEvent: (ev) => pending.push(ev) });
        const calls = new Map<number, { id: string; name: string; args: string; started: boolean }>();
        let usage: { inputTokens: number | null; outputTokens: number | null } = {
          inputTokens: null,
          outputTokens: null,
        };
        let done = false;
        let finished = false;
        const decoder = new TextDecoder();
        const reader = res.body.getReader();
        try {
          while (!done) {
            let chunk: Awaited<ReturnType<typeof reader.read>>;
            try {
              chunk = await reader.read();
            } catch (err) {
              throw fail(err);
            }
            if (chunk.done) break;
            parser.feed(decoder.decode(chunk.value, { stream: true }));
            while (pending.length) {
              const ev = pending.shift()!;
              if (ev.data.trim() === '[DONE]') {
                done = true;
                break;
              }
              let data: Chunk;
              try {
                data = JSON.parse(ev.data) as Chunk;
              } catch {
                continue; // a keepalive or a line we do not know: not ours to fail on
              }
              if (data.error)
                throw new EngineError(
                  `the assistant provider reported an error${data.error.message ? `: ${mask(String(data.error.message)).slice(0, SNIPPET)}` : ''}`,
                  'engine_error',
                );
              if (data.usage)
                usage = {
                  inputTokens: data.usage.prompt_tokens ?? null,
                  outputTokens: data.usage.completion_tokens ?? null,
                };
              for (const choice of data.choices ?? []) {
                if ((choice.index ?? 0) !== 0) continue;
                if (choice.finish_reason) finished = true;
                const delta = choice.delta ?? {};
                if (typeof delta.content === 'string' && delta.content)
                  yield { type: 'text-delta', delta: delta.content };
                for (const tc of delta.tool_calls ?? []) {
                  const i = tc.index ?? 0;
                  const cur = calls.get(i) ?? { id: '', name: '', args: '', started: false };
                  if (tc.id) cur.id = tc.id;
                  if (tc.function?.name) cur.name += tc.function.name;
                  if (tc.function?.arguments) cur.args += tc.function.arguments;
                  calls.set(i, cur);
                  // A name may come in pieces; once arguments flow it is whole.
                  if (!cur.started && cur.id && cur.name && tc.function?.arguments) {
                    cur.started = true;
                    yield { type: 'tool-call-start', id: cur.id, name: cur.name };
                  }
                }
              }
            }
          }
        } finally {
          reader.releaseLock();
        }
        if (!done && !finished)
          throw fail(
            new EngineError('the assistant provider ended the stream before it finished', 'engine_unavailable'),
          );
        for (const [i, c] of [...calls.entries()].sort((a, b) => a[0] - b[0])) {
          const id = c.id || `call_${input.stepIndex}_${i}`;
          if (!c.name) continue; // a call without a name cannot be run or answered
          if (!c.started) yield { type: 'tool-call-start', id, name: c.name };
          let args: unknown;
          try {
            args = c.args.trim() ? JSON.parse(c.args) : {};
          } catch {
            args = c.args;
          }
          yield { type: 'tool-call', call: { id, name: c.name, args } };
        }
        yield { type: 'usage', ...usage };
      } finally {
        clearTimeout(timer);
        input.signal.removeEventListener('abort', onAbort);
        // The consumer stopped early or something failed: stop the request too.
        ctrl.abort();
      }
    },
  };
}
