import type { ChatArtifact } from '../../../contracts/conversations';
import type { ChatEngine, EngineEvent, EngineInfo, EngineMessage, StepInput, ToolCall } from '../engine';
import { plan, type PlannedCall } from './planner';

export const LOCAL_ENGINE_INFO: EngineInfo = {
  assistantName: 'svc assistant',
  lab: 'local',
  labName: 'Built-in planner',
  model: 'local-planner-v1',
};

/** Words per streamed text-delta: a reply arrives in several pieces, as a model's would. */
const WORDS_PER_DELTA = 3;

/**
 * The offline engine: deterministic, no model. Its first step plans tool calls from the last
 * user message (planner.ts); once the tools have answered it writes a short reply naming what
 * was made (titles and links) or what failed. In think mode it may chain one more tool first: a
 * notes project that goes with a research job, a deck or a flowchart. Tool call ids are
 * `call_<step>_<n>`, unique within a turn.
 */
export function createLocalEngine(opts: { publicBaseUrl: string }): ChatEngine {
  const base = opts.publicBaseUrl.replace(/\/+$/, '');
  return {
    info: LOCAL_ENGINE_INFO,
    async *step(input: StepInput): AsyncGenerator<EngineEvent> {
      input.signal.throwIfAborted();
      const { messages } = input;
      const offered = new Set(input.tools.map((t) => t.name));
      const lastUser = findLastIndex(messages, (m) => m.role === 'user');
      const request = lastUser >= 0 ? (messages[lastUser] as { content: string }).content : '';
      const thisTurn = messages.slice(lastUser + 1);
      const results = thisTurn.filter((m): m is Extract<EngineMessage, { role: 'tool' }> => m.role === 'tool');
      const made = artifactsOf(messages);

      let calls: PlannedCall[] = [];
      let reply: string;
      if (results.length === 0) {
        const p = plan(request, { tools: offered, artifacts: made });
        if ('calls' in p) calls = p.calls;
        reply = 'text' in p ? p.text : '';
      } else {
        const companion =
          input.mode === 'think' && results.length === callsOf(thisTurn).length
            ? companionCall(callsOf(thisTurn), results, offered, base)
            : null;
        if (companion) calls = [companion];
        reply = replyFor(results, base);
      }

      if (calls.length) {
        for (const [i, c] of calls.entries()) {
          const call: ToolCall = { id: `call_${input.stepIndex}_${i + 1}`, name: c.name, args: c.args };
          yield { type: 'tool-call-start', id: call.id, name: call.name };
          yield { type: 'tool-call', call };
        }
      } else {
        for (const delta of pieces(reply)) {
          input.signal.throwIfAborted();
          yield { type: 'text-delta', delta };
        }
      }
      // No model ran: no tokens were used.
      yield { type: 'usage', inputTokens: 0, outputTokens: 0 };
    },
  };
}

function findLastIndex<T>(xs: readonly T[], p: (x: T) => boolean): number {
  for (let i = xs.length - 1; i >= 0; i--) if (p(xs[i]!)) return i;
  return -1;
}

/** Every artifact in the history, oldest first: earlier turns' (on assistant messages) and this turn's tool results. */
function artifactsOf(messages: readonly EngineMessage[]): ChatArtifact[] {
  return messages.flatMap((m) =>
    m.role === 'assistant' ? (m.artifacts ?? []) : m.role === 'tool' ? [m.artifact] : [],
  );
}

const callsOf = (turn: readonly EngineMessage[]): ToolCall[] =>
  turn.flatMap((m) => (m.role === 'assistant' ? (m.toolCalls ?? []) : []));

/** Text in pieces of a few words, spaces kept, so the pieces join back to the text exactly. */
export function pieces(text: string): string[] {
  const words = text.match(/\S+\s*/g) ?? [];
  const lead = /^\s+/.exec(text)?.[0] ?? '';
  const out: string[] = [];
  for (let i = 0; i < words.length; i += WORDS_PER_DELTA) out.push(words.slice(i, i + WORDS_PER_DELTA).join(''));
  if (lead && out.length) out[0] = lead + out[0];
  return out.length ? out : text ? [text] : [];
}

/** Think mode: one more tool that goes with what the first made (a plan, speaker notes, a write-up). */
function companionCall(
  calls: readonly ToolCall[],
  results: readonly { artifact: ChatArtifact }[],
  offered: ReadonlySet<string>,
  base: string,
): PlannedCall | null {
  if (calls.length !== 1 || results.length !== 1) return null;
  const first = calls[0]!;
  const made = results[0]!.artifact;
  if (made.type === 'error') return null;
  const args = (first.args ?? {}) as Record<string, unknown>;
  const link = made.openUrl ?? (typeof made.data?.pollUrl === 'string' ? `${base}${made.data.pollUrl}` : undefined);
  if (first.name === 'start_research' && offered.has('create_notes')) {
    const q = String(args.query ?? made.title);
    const title = `Research plan: ${q}`.slice(0, 200);
    const md = [
      `# ${title}`,
      '',
      link ? `The report is being written: ${link}` : '',
      '',
      '## Questions to answer',
      `- What is already known about ${q}?`,
      `- Which sources in the workspace speak to ${q}?`,
      `- Where do the sources disagree, and why?`,
      '',
      '## After the report',
      '- [ ] Read the report and mark the claims to check',
      '- [ ] Share a one-paragraph summary with the team',
      '',
    ].join('\n');
    return { name: 'create_notes', args: { title, markdown: md } };
  }
  if (first.name === 'create_presentation' && offered.has('create_notes')) {
    const title = `Speaker notes: ${made.title}`.slice(0, 200);
    const md = [
      `# ${title}`,
      '',
      link ? `Deck: ${link}` : '',
      '',
      '## Opening',
      `- Why ${made.title} matters to this audience`,
      '',
      '## Flow',
      '- One message per slide; say the takeaway first',
      '- Pause for questions after the middle section',
      '',
      '## Close',
      '- The one thing to remember, and the next step we ask for',
      '',
    ].join('\n');
    return { name: 'create_notes', args: { title, markdown: md } };
  }
  if (first.name === 'create_flowchart' && offered.has('create_document')) {
    const steps = Array.isArray(args.steps) ? (args.steps as unknown[]).map(String) : [];
    const title = `${made.title}: how it works`.slice(0, 200);
    const md = [
      `# ${title}`,
      '',
      link ? `Flowchart: ${link}` : '',
      '',
      ...steps.map((s, i) => `${i + 1}. ${s}${s.trim().endsWith('?') ? ' If not, go back one step.' : ''}`),
      '',
    ].join('\n');
    return { name: 'create_document', args: { title, markdown: md } };
  }
  return null;
}

const NOUN: Partial<Record<ChatArtifact['type'], string>> = {
  flowchart: 'flowchart',
  whiteboard: 'whiteboard',
  notes: 'notes',
  document: 'document',
  presentation: 'presentation',
  sheet: 'sheet',
  social_board: 'board',
  image: 'image',
  video: 'video',
  song: 'song',
};

function lineFor(a: ChatArtifact, base: string): string {
  const d = (a.data ?? {}) as Record<string, unknown>;
  const poll = typeof d.pollUrl === 'string' ? `${base}${d.pollUrl}` : null;
  if (a.type === 'error') {
    const tool = typeof d.tool === 'string' ? d.tool.replace(/_/g, ' ') : 'that';
    return `I could not ${tool === 'that' ? 'do that' : `run ${tool}`}: ${String(d.message ?? a.title)}.`;
  }
  if (a.type === 'image') return `Here is the image **${a.title}**: ${String(d.url)}`;
  if (a.type === 'platform_action') return `${a.title}: ${String(d.url)}`;
  if (a.type === 'brand_theme') {
    const p = (d.palette ?? {}) as Record<string, string>;
    const f = (d.fonts ?? {}) as Record<string, string>;
    return `The **${a.title}**: primary ${p.primary}, secondary ${p.secondary}, accent ${p.accent}; ${f.heading} for headings and ${f.body} for text.`;
  }
  if (a.type === 'social_board')
    return `The board **${a.title}** is ready with ${String(d.cardCount ?? 0)} cards in ${String(d.columnCount ?? 0)} lanes: ${a.openUrl}`;
  if (typeof d.stepsAdded === 'number')
    return `I added ${d.stepsAdded} step${d.stepsAdded === 1 ? '' : 's'} to **${a.title}**: ${a.openUrl}`;
  const noun =
    d.kind === 'code_build'
      ? 'app'
      : d.kind === 'research'
        ? 'research report'
        : (NOUN[a.type] ?? a.type.replace(/_/g, ' '));
  if (a.openUrl && poll)
    return `The ${noun} **${a.title}** is on its way: ${a.openUrl} (it is being built in the background; follow it at ${poll}).`;
  if (a.openUrl) {
    const fill =
      a.type === 'sheet' && typeof d.rowCount === 'number' && d.rowCount > 0
        ? ` (${d.rowCount} rows, ready for your figures)`
        : '';
    return `The ${noun} **${a.title}** is ready: ${a.openUrl}${fill}`;
  }
  if (poll) return `The ${noun} **${a.title}** has started; follow it at ${poll}.`;
  const note = typeof d.message === 'string' ? d.message : typeof d.summary === 'string' ? d.summary : '';
  return `**${a.title}**${note ? `: ${note}` : ''}`;
}

/** The reply after the tools ran: one line per artifact, in order. */
export function replyFor(results: readonly { artifact: ChatArtifact }[], base: string): string {
  const lines = results.map((r) => lineFor(r.artifact, base));
  const failed = results.filter((r) => r.artifact.type === 'error').length;
  const intro =
    failed === results.length
      ? ''
      : failed
        ? 'Here is what I made, and what did not work:\n'
        : results.length > 1
          ? 'Here is what I made:\n'
          : '';
  return intro ? `${intro}${lines.map((l) => `- ${l}`).join('\n')}` : lines.join('\n');
}
