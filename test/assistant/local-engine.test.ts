import { expect } from 'chai';
import type { ChatArtifact } from '../../contracts/conversations';
import type { EngineEvent, EngineMessage, ToolSpec } from '../../platform/assistant/engine';
import { createLocalEngine } from '../../platform/assistant/engines/local';
import { ASSISTANT_TOOL_NAMES } from '../../platform/assistant/tools';

const BASE = 'http://svc.test';
const spec = (name: string): ToolSpec => ({ name, description: name, parameters: { type: 'object' } });
const CHAT_TOOLS = ASSISTANT_TOOL_NAMES.map(spec);
const AGENT_TOOLS = [...CHAT_TOOLS, spec('send_email'), spec('list_projects')];

async function step(
  messages: EngineMessage[],
  opts: { tools?: ToolSpec[]; mode?: 'fast' | 'think'; stepIndex?: number } = {},
): Promise<EngineEvent[]> {
  const engine = createLocalEngine({ publicBaseUrl: BASE });
  const out: EngineEvent[] = [];
  for await (const ev of engine.step({
    messages,
    tools: opts.tools ?? CHAT_TOOLS,
    mode: opts.mode ?? 'fast',
    stepIndex: opts.stepIndex ?? 0,
    signal: new AbortController().signal,
  }))
    out.push(ev);
  return out;
}

const callsIn = (events: EngineEvent[]) => events.flatMap((e) => (e.type === 'tool-call' ? [e.call] : []));
const textOf = (events: EngineEvent[]) => events.flatMap((e) => (e.type === 'text-delta' ? [e.delta] : [])).join('');
const ask = (content: string): EngineMessage[] => [{ role: 'user', content }];

describe('assistant: the local engine', () => {
  const cases: [string, string, (args: any) => void][] = [
    [
      'make a flowchart of our hiring process',
      'create_flowchart',
      (a) => {
        expect(a.title).to.equal('Hiring process');
        expect(a.steps).to.include('Interview candidates').and.to.include('Make an offer');
        expect(a.steps.some((s: string) => s.endsWith('?'))).to.equal(true);
      },
    ],
    [
      'write notes about the Q3 roadmap',
      'create_notes',
      (a) => {
        expect(a.title).to.equal('Q3 roadmap');
        expect(a.markdown).to.match(/^# Q3 roadmap\n/);
        const bullets = (a.markdown as string).split('\n').filter((l) => l.startsWith('- '));
        expect(bullets.length).to.be.at.least(5);
        expect(new Set(bullets).size).to.equal(bullets.length);
        expect(bullets.every((b) => b.includes('Q3 roadmap') || b.includes('[ ]'))).to.equal(true);
      },
    ],
    [
      'draw an image of a lighthouse at dusk',
      'generate_image',
      (a) => expect(a).to.deep.equal({ prompt: 'lighthouse at dusk' }),
    ],
    [
      'make a 5-slide deck about our product launch',
      'create_presentation',
      (a) => {
        expect(a.title).to.equal('Product launch');
        expect(a.slideCount).to.equal(5);
        expect(a.brief).to.include('product launch');
      },
    ],
    ['compose a song in the style of sea shanties', 'compose_song', (a) => expect(a.style).to.equal('sea shanties')],
    ['build me a todo app', 'build_code', (a) => expect(a).to.deep.equal({ prompt: 'Todo app' })],
    [
      'research remote onboarding practices',
      'start_research',
      (a) => expect(a).to.deep.equal({ query: 'Remote onboarding practices' }),
    ],
    [
      'make a board for the launch',
      'create_board',
      (a) => {
        expect(a.columns).to.deep.equal(['To do', 'Doing', 'Done']);
        expect(a.cards.length).to.be.at.least(4);
        expect(a.cards.map((c: any) => c.title)).to.include('Write the announcement');
      },
    ],
    [
      'a sheet of monthly costs',
      'create_sheet',
      (a) => {
        expect(a.columns).to.deep.equal(['Month', 'Category', 'Amount']);
        expect(a.rows).to.have.length(12);
        expect(a.rows[0][0]).to.equal('January');
        expect(a.rows[11][0]).to.equal('December');
      },
    ],
    [
      'make a video of waves on a beach',
      'generate_video',
      (a) => expect(a).to.deep.equal({ prompt: 'waves on a beach' }),
    ],
    ['make a whiteboard for the offsite', 'create_whiteboard', (a) => expect(a.notes.length).to.be.greaterThan(2)],
    [
      'write a document about our security policy',
      'create_document',
      (a) => expect(a.title).to.equal('Security policy'),
    ],
    ['search the web for vegan recipes', 'web_search', (a) => expect(a).to.deep.equal({ query: 'vegan recipes' })],
    [
      'make a brand palette for Acme with #ff0000',
      'brand_theme',
      (a) => expect(a).to.deep.equal({ brand: 'Acme', colors: ['#ff0000'] }),
    ],
    ['open my billing', 'platform_action', (a) => expect(a).to.deep.equal({ action: 'open_billing' })],
    ['make a flowchart of our onboarding', 'create_flowchart', (a) => expect(a.steps).to.include('Meet the team')],
    [
      'make a flowchart: wake up, make coffee, then read the news',
      'create_flowchart',
      (a) => expect(a.steps).to.deep.equal(['Wake up', 'Make coffee', 'Read the news']),
    ],
    [
      'make a flowchart of garden watering',
      'create_flowchart',
      (a) => {
        expect(a.steps.length).to.be.within(4, 6);
        expect(a.steps.filter((s: string) => s.includes('garden watering')).length).to.be.at.least(3);
      },
    ],
  ];
  for (const [request, tool, check] of cases) {
    it(`when asked "${request}", then it calls ${tool} with arguments taken from the request`, async () => {
      const events = await step(ask(request));
      const calls = callsIn(events);
      expect(calls.map((c) => c.name)).to.deep.equal([tool]);
      check(calls[0]!.args);
      // tool-call-start comes before its tool-call, with the same id.
      const start = events.findIndex((e) => e.type === 'tool-call-start');
      expect(events[start]).to.deep.include({ id: calls[0]!.id, name: tool });
      expect(start).to.be.lessThan(events.findIndex((e) => e.type === 'tool-call'));
    });
  }

  it('when the same request is planned twice, then the events are identical (deterministic)', async () => {
    for (const request of [
      'make a flowchart of our hiring process',
      'a sheet of monthly costs',
      'compose a song about rain in the style of jazz',
    ]) {
      expect(await step(ask(request))).to.deep.equal(await step(ask(request)));
    }
  });

  it('when "add a step … to that flowchart" follows a flowchart, then it adds to the newest flowchart of the history', async () => {
    const older: ChatArtifact = {
      type: 'flowchart',
      title: 'Old',
      projectId: 'prj_old',
      projectType: 'chart',
      openUrl: `${BASE}/editor/prj_old`,
    };
    const newer: ChatArtifact = {
      type: 'flowchart',
      title: 'Hiring process',
      projectId: 'prj_new',
      projectType: 'chart',
      openUrl: `${BASE}/editor/prj_new`,
    };
    const history: EngineMessage[] = [
      { role: 'user', content: 'make a flowchart of x' },
      { role: 'assistant', content: 'done', artifacts: [older] },
      { role: 'user', content: 'make a flowchart of our hiring process' },
      { role: 'assistant', content: 'done', artifacts: [newer] },
      { role: 'user', content: 'add a step for reference checks after interviews to that flowchart' },
    ];
    const [call] = callsIn(await step(history));
    expect(call).to.deep.include({
      name: 'add_flowchart_steps',
      args: { projectId: 'prj_new', steps: ['Reference checks'], after: 'Interviews' },
    });
  });

  it('when "that flowchart" names nothing, then it answers in text and calls no tool', async () => {
    const events = await step(ask('add a step for reference checks to that flowchart'));
    expect(callsIn(events)).to.deep.equal([]);
    expect(textOf(events)).to.match(/could not find a flowchart/);
  });

  it('when the agent actions are offered, then an email and a project list are planned; without them they are not', async () => {
    const [email] = callsIn(await step(ask('email alice@example.com about the launch'), { tools: AGENT_TOOLS }));
    expect(email).to.deep.include({ name: 'send_email' });
    expect(email!.args).to.deep.include({ to: 'alice@example.com', subject: 'About the launch' });
    const [list] = callsIn(await step(ask('list my projects'), { tools: AGENT_TOOLS }));
    expect(list).to.deep.include({ name: 'list_projects', args: {} });
    expect(callsIn(await step(ask('list my projects')))).to.deep.equal([]);
  });

  it('when the request is unknown, then it answers helpfully in several text-deltas and calls no tool', async () => {
    const events = await step(ask('hello there'));
    expect(callsIn(events)).to.deep.equal([]);
    expect(events.filter((e) => e.type === 'text-delta').length).to.be.greaterThan(3);
    expect(textOf(events)).to.include('flowchart');
    expect(events[events.length - 1]).to.deep.equal({ type: 'usage', inputTokens: 0, outputTokens: 0 });
  });

  it('when the tools have answered, then the reply names each artifact by title with its link, and what failed', async () => {
    const flow: ChatArtifact = {
      type: 'flowchart',
      title: 'Hiring process',
      projectId: 'prj_a',
      projectType: 'chart',
      openUrl: `${BASE}/editor/prj_a`,
    };
    const song: ChatArtifact = {
      type: 'song',
      title: 'Rain',
      data: { apiJobId: 'song_x', pollUrl: '/api/v1/jobs/song_x' },
    };
    const failed: ChatArtifact = {
      type: 'error',
      title: 'Could not run generate_image',
      data: { message: 'not enough AI credits: image costs 2', tool: 'generate_image', code: 'insufficient_credits' },
    };
    const messages: EngineMessage[] = [
      ...ask('do three things'),
      {
        role: 'assistant',
        content: '',
        toolCalls: [
          { id: 'c1', name: 'create_flowchart', args: {} },
          { id: 'c2', name: 'compose_song', args: {} },
          { id: 'c3', name: 'generate_image', args: {} },
        ],
      },
      { role: 'tool', toolCallId: 'c1', name: 'create_flowchart', artifact: flow },
      { role: 'tool', toolCallId: 'c2', name: 'compose_song', artifact: song },
      { role: 'tool', toolCallId: 'c3', name: 'generate_image', artifact: failed },
    ];
    const events = await step(messages, { stepIndex: 1 });
    expect(callsIn(events)).to.deep.equal([]);
    expect(events.filter((e) => e.type === 'text-delta').length).to.be.greaterThan(3);
    const text = textOf(events);
    expect(text).to.include('**Hiring process**').and.to.include(`${BASE}/editor/prj_a`);
    expect(text).to.include('**Rain**').and.to.include(`${BASE}/api/v1/jobs/song_x`);
    expect(text).to.include('I could not run generate image: not enough AI credits');
  });

  it('when in think mode a research job started, then it chains a notes plan before replying; fast mode replies at once', async () => {
    const research: ChatArtifact = {
      type: 'document',
      title: 'Research: Remote onboarding',
      data: { apiJobId: 'res_1', pollUrl: '/api/v1/jobs/res_1', kind: 'research' },
    };
    const turn: EngineMessage[] = [
      ...ask('research remote onboarding'),
      {
        role: 'assistant',
        content: '',
        toolCalls: [{ id: 'call_0_1', name: 'start_research', args: { query: 'Remote onboarding' } }],
      },
      { role: 'tool', toolCallId: 'call_0_1', name: 'start_research', artifact: research },
    ];
    const [notes] = callsIn(await step(turn, { mode: 'think', stepIndex: 1 }));
    expect(notes).to.deep.include({ id: 'call_1_1', name: 'create_notes' });
    expect((notes!.args as any).title).to.equal('Research plan: Remote onboarding');
    expect((notes!.args as any).markdown).to.include(`${BASE}/api/v1/jobs/res_1`);
    expect(callsIn(await step(turn, { mode: 'fast', stepIndex: 1 }))).to.deep.equal([]);

    const after: EngineMessage[] = [
      ...turn,
      { role: 'assistant', content: '', toolCalls: [notes!] },
      {
        role: 'tool',
        toolCallId: notes!.id,
        name: 'create_notes',
        artifact: {
          type: 'notes',
          title: 'Research plan: Remote onboarding',
          projectId: 'prj_n',
          projectType: 'notes',
          openUrl: `${BASE}/notes/prj_n`,
        },
      },
    ];
    const final = await step(after, { mode: 'think', stepIndex: 2 });
    expect(callsIn(final)).to.deep.equal([]);
    expect(textOf(final)).to.include('**Research plan: Remote onboarding**').and.to.include('research report');
  });

  it('when the signal is aborted, then a step stops at once', async () => {
    const engine = createLocalEngine({ publicBaseUrl: BASE });
    const ctrl = new AbortController();
    ctrl.abort();
    const it = engine
      .step({ messages: ask('hello'), tools: CHAT_TOOLS, mode: 'fast', stepIndex: 0, signal: ctrl.signal })
      [Symbol.asyncIterator]();
    let failed = false;
    try {
      await it.next();
    } catch {
      failed = true;
    }
    expect(failed).to.equal(true);
  });
});
