import type { ChatEngine, EngineEvent, EngineMessage, StepInput, ToolCall } from '../assistant/engine';
import { createChatEngine } from '../assistant/engines';
import type { Config } from '../infra/config';
import { lineFor } from './tools';

/** Live requests the offline planner does not know: memory, account, projects and the robot's own tools. */
const LIVE_INTENTS: { tool: string; re: RegExp; args: (m: RegExpExecArray) => Record<string, unknown> }[] = [
  {
    tool: 'get_device_status',
    re: /\b(device|robot)('s)? status\b|\bbattery\b|\bhow are you (doing|running)\b/i,
    args: () => ({}),
  },
  {
    tool: 'set_volume',
    re: /\b(?:set|turn)\b.*\bvolume\b\D*(\d{1,3})\b/i,
    args: (m) => ({ level: Math.min(100, Number(m[1])) }),
  },
  {
    tool: 'recall',
    re: /\bwhat do you (?:remember|know)(?: about (.+?))?[?.!]*$|^(?:\p{L}+,\s*)?recall\b(?: (.+?))?[?.!]*$/iu,
    args: (m) => {
      const q = (m[1] ?? m[2])?.trim();
      return q ? { query: q } : {};
    },
  },
  {
    tool: 'remember',
    re: /\bremember that (.+)|^(?:\p{L}+,\s*)?(?:please )?remember (.+)/iu,
    args: (m) => ({ text: (m[1] ?? m[2])!.trim().replace(/[.!?]+$/, '') }),
  },
  { tool: 'get_account', re: /\bmy (?:credits?|balance|plan)\b|\bhow many credits\b/i, args: () => ({}) },
  { tool: 'list_projects', re: /\b(?:list|show|what are) (?:me )?my projects\b/i, args: () => ({}) },
];

/**
 * The assistant of a live session: the configured chat engine (CHAT_ENGINE), with two
 * additions for the offline planner, which knows only the chat catalogue: the live-only tools
 * above are recognised first, and once tools have answered, the reply is the spoken line of
 * each result (no links or markdown: it is read aloud). A model engine (openai) gets the tools
 * as specs and decides itself.
 */
export function createLiveEngine(config: Config, opts: { fetch?: typeof fetch } = {}): ChatEngine {
  const inner = createChatEngine(config, opts);
  if (config.CHAT_ENGINE !== 'local') return inner;
  return {
    info: inner.info,
    async *step(input: StepInput): AsyncGenerator<EngineEvent> {
      const { messages } = input;
      let lastUser = -1;
      for (let i = messages.length - 1; i >= 0; i--)
        if (messages[i]!.role === 'user') {
          lastUser = i;
          break;
        }
      const thisTurn = messages.slice(lastUser + 1);
      const results = thisTurn.filter((m): m is Extract<EngineMessage, { role: 'tool' }> => m.role === 'tool');
      if (results.length) {
        const reply = results.map((r) => lineFor(r.name, r.artifact)).join(' ');
        for (const w of reply.match(/\S+\s*/g) ?? []) yield { type: 'text-delta', delta: w };
        yield { type: 'usage', inputTokens: 0, outputTokens: 0 };
        return;
      }
      const text = lastUser >= 0 ? (messages[lastUser] as { content: string }).content : '';
      const offered = new Set(input.tools.map((t) => t.name));
      for (const intent of LIVE_INTENTS) {
        if (!offered.has(intent.tool)) continue;
        const m = intent.re.exec(text);
        if (!m) continue;
        const call: ToolCall = { id: `call_${input.stepIndex}_1`, name: intent.tool, args: intent.args(m) };
        yield { type: 'tool-call-start', id: call.id, name: call.name };
        yield { type: 'tool-call', call };
        yield { type: 'usage', inputTokens: 0, outputTokens: 0 };
        return;
      }
      yield* inner.step(input);
    },
  };
}
