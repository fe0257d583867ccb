import { expect } from 'chai';
import type { ChatEngine, EngineEvent, EngineMessage, StepInput } from '../../platform/assistant/engine';
import { eventually, type Client } from '../../scripts/harness/http';

/**
 * The deployment's engine, except for instructions that start with `script:`, which the test
 * scripts exactly (the local engine plans one call per request; some rules need two):
 * - `script:[{"name": "...", "args": {...}}, …]`: step 0 asks for these calls, step 1 replies
 *   naming the tool results;
 * - `script:recall`: replies with the user messages the run saw as thread history.
 */
export function scriptedOr(inner: ChatEngine): ChatEngine {
  const lastUser = (messages: EngineMessage[]) => [...messages].reverse().find((m) => m.role === 'user')?.content ?? '';
  return {
    info: inner.info,
    step(input: StepInput): AsyncIterable<EngineEvent> {
      const request = lastUser(input.messages);
      if (!request.startsWith('script:')) return inner.step(input);
      const script = request.slice('script:'.length).trim();
      return (async function* () {
        if (script === 'recall') {
          const before = input.messages
            .slice(0, -1)
            .filter((m) => m.role === 'user')
            .map((m) => m.content);
          yield { type: 'text-delta', delta: `history: ${JSON.stringify(before)}` } as EngineEvent;
          return;
        }
        if (input.stepIndex === 0) {
          const calls = JSON.parse(script) as { name: string; args: unknown }[];
          for (const [i, c] of calls.entries())
            yield { type: 'tool-call', call: { id: `call_${i}`, name: c.name, args: c.args } } as EngineEvent;
          return;
        }
        const results = input.messages
          .filter((m) => m.role === 'tool')
          .map((m) => (m.role === 'tool' ? `${m.name}: ${m.artifact.type} ${m.artifact.title}` : ''));
        yield { type: 'text-delta', delta: `Done. ${results.join('; ')}` } as EngineEvent;
      })();
    },
  };
}

export const emailCall = (to: string, subject = 'About the launch') => ({
  name: 'send_email',
  args: { to, subject, body: `Hello ${to}` },
});
export const script = (calls: unknown[]) => `script:${JSON.stringify(calls)}`;

/** Poll GET …/result until the run is in one of `statuses`. */
export async function waitForRun(
  api: Client,
  agentId: string,
  runId: string,
  statuses: string[] = ['completed', 'failed', 'paused'],
  timeoutMs = 20_000,
) {
  return eventually(
    async () => {
      const r = await api.get(`/agents/${agentId}/runs/${runId}/result`);
      expect(r.status, r.text).to.equal(200);
      return statuses.includes(r.body.status) ? r.body : undefined;
    },
    timeoutMs,
    `run ${runId} in ${statuses.join('|')}`,
  );
}
