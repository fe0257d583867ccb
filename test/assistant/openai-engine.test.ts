import { expect } from 'chai';
import type http from 'node:http';
import { EngineError, type EngineEvent, type EngineMessage, type StepInput } from '../../platform/assistant/engine';
import { createChatEngine } from '../../platform/assistant/engines';
import { loadConfig } from '../../platform/infra/config';
import { fakeServer, type Recorded } from '../helpers/fake-provider';

const KEY = 'sk-test-secret-0123456789';
const TOOLS = [
  {
    name: 'create_flowchart',
    description: 'Create a flowchart',
    parameters: {
      type: 'object',
      properties: { title: { type: 'string' }, steps: { type: 'array', items: { type: 'string' } } },
    },
  },
];

const engineFor = (baseUrl: string, env: Record<string, string> = {}) =>
  createChatEngine(
    loadConfig({
      NODE_ENV: 'test',
      CHAT_ENGINE: 'openai',
      OPENAI_BASE_URL: `${baseUrl}/v1`,
      OPENAI_API_KEY: KEY,
      CHAT_MODEL: 'gpt-test',
      CHAT_TIMEOUT_MS: '2000',
      ...env,
    }),
  );

const chunk = (delta: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  id: 'chatcmpl-1',
  object: 'chat.completion.chunk',
  created: 1_700_000_000,
  model: 'gpt-test',
  choices: [{ index: 0, delta, finish_reason: null }],
  ...extra,
});

/** Writes SSE events one by one with a pause, as a provider streams them. */
async function stream(res: http.ServerResponse, events: unknown[], pauseMs = 5) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (const ev of events) {
    res.write(typeof ev === 'string' ? ev : `data: ${JSON.stringify(ev)}\n\n`);
    await new Promise((r) => setTimeout(r, pauseMs));
  }
  res.end();
}

async function collect(iter: AsyncIterable<EngineEvent>): Promise<EngineEvent[]> {
  const out: EngineEvent[] = [];
  for await (const ev of iter) out.push(ev);
  return out;
}

async function failure(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected a failure');
}

const input = (over: Partial<StepInput> = {}): StepInput => ({
  messages: [{ role: 'user', content: 'make a flowchart of our hiring process' }],
  tools: TOOLS,
  mode: 'fast',
  stepIndex: 0,
  signal: new AbortController().signal,
  ...over,
});

describe('assistant: the OpenAI-compatible engine against a fake provider', () => {
  let provider: Awaited<ReturnType<typeof fakeServer>> | undefined;
  afterEach(async () => {
    await provider?.close();
    provider = undefined;
  });

  it('when the provider streams text and a tool call split across chunks, then text-deltas pass through and the call is assembled, with usage', async () => {
    provider = await fakeServer((_req, res) =>
      stream(res, [
        chunk({ role: 'assistant', content: '' }),
        chunk({ content: 'Making ' }),
        chunk({ content: 'your flowchart.' }),
        chunk({
          tool_calls: [{ index: 0, id: 'call_abc', type: 'function', function: { name: 'create_', arguments: '' } }],
        }),
        chunk({ tool_calls: [{ index: 0, function: { name: 'flowchart' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '{"title":"Hir' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: 'ing process","steps":["Open the role",' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '"Make an offer"]}' } }] }),
        ': keepalive\n\n',
        { ...chunk({}), choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
        {
          id: 'chatcmpl-1',
          object: 'chat.completion.chunk',
          created: 1_700_000_000,
          model: 'gpt-test',
          choices: [],
          usage: { prompt_tokens: 42, completion_tokens: 17, total_tokens: 59 },
        },
        'data: [DONE]\n\n',
      ]),
    );
    const engine = engineFor(provider.url);
    expect(engine.info).to.deep.equal({
      assistantName: 'svc assistant',
      lab: 'openai-compatible',
      labName: new URL(provider.url).host,
      model: 'gpt-test',
    });
    const events = await collect(engine.step(input()));
    expect(events).to.deep.equal([
      { type: 'text-delta', delta: 'Making ' },
      { type: 'text-delta', delta: 'your flowchart.' },
      { type: 'tool-call-start', id: 'call_abc', name: 'create_flowchart' },
      {
        type: 'tool-call',
        call: {
          id: 'call_abc',
          name: 'create_flowchart',
          args: { title: 'Hiring process', steps: ['Open the role', 'Make an offer'] },
        },
      },
      { type: 'usage', inputTokens: 42, outputTokens: 17 },
    ]);

    const sent = JSON.parse(provider.requests[0]!.body);
    expect(provider.requests[0]!.url).to.equal('/v1/chat/completions');
    expect(provider.requests[0]!.headers.authorization).to.equal(`Bearer ${KEY}`);
    expect(sent).to.deep.include({
      model: 'gpt-test',
      stream: true,
      stream_options: { include_usage: true },
      tool_choice: 'auto',
    });
    expect(sent.tools).to.deep.equal([{ type: 'function', function: TOOLS[0] }]);
  });

  it('when two tool calls stream interleaved, one with bad JSON arguments, then each starts once its arguments flow and bad JSON goes on raw', async () => {
    provider = await fakeServer((_req, res) =>
      stream(res, [
        chunk({
          tool_calls: [
            {
              index: 0,
              id: 'call_1',
              type: 'function',
              function: { name: 'create_flowchart', arguments: '{"title":' },
            },
          ],
        }),
        chunk({
          tool_calls: [
            { index: 1, id: 'call_2', type: 'function', function: { name: 'create_flowchart', arguments: '' } },
          ],
        }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '"A"}' } }] }),
        chunk({ tool_calls: [{ index: 1, function: { arguments: '{"title": "B", oops' } }] }),
        { ...chunk({}), choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
        'data: [DONE]\n\n',
      ]),
    );
    const events = await collect(engineFor(provider.url).step(input()));
    expect(events.slice(0, 2)).to.deep.equal([
      { type: 'tool-call-start', id: 'call_1', name: 'create_flowchart' },
      { type: 'tool-call-start', id: 'call_2', name: 'create_flowchart' },
    ]);
    const calls = events.flatMap((e) => (e.type === 'tool-call' ? [e.call] : []));
    expect(calls[0]).to.deep.equal({ id: 'call_1', name: 'create_flowchart', args: { title: 'A' } });
    // Unparseable arguments go on as the raw string: the tool's validation reports them.
    expect(calls[1]).to.deep.equal({ id: 'call_2', name: 'create_flowchart', args: '{"title": "B", oops' });
    expect(events[events.length - 1]).to.deep.equal({ type: 'usage', inputTokens: null, outputTokens: null });
  });

  it('when the history holds tool calls, results and earlier artifacts, then they are sent in the chat-completions shape', async () => {
    provider = await fakeServer((_req, res) =>
      stream(res, [
        chunk({ content: 'Done.' }),
        { ...chunk({}), choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] },
        'data: [DONE]\n\n',
      ]),
    );
    const flow = {
      type: 'flowchart' as const,
      title: 'Hiring process',
      projectId: 'prj_1',
      projectType: 'chart' as const,
      openUrl: 'http://x/editor/prj_1',
    };
    const messages: EngineMessage[] = [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'make a flowchart of hiring' },
      { role: 'assistant', content: 'Here it is.', artifacts: [flow] },
      { role: 'user', content: 'add a step' },
      {
        role: 'assistant',
        content: '',
        toolCalls: [
          { id: 'call_9', name: 'add_flowchart_steps', args: { projectId: 'prj_1', steps: ['Reference checks'] } },
        ],
      },
      { role: 'tool', toolCallId: 'call_9', name: 'add_flowchart_steps', artifact: flow },
    ];
    await collect(engineFor(provider.url).step(input({ messages, stepIndex: 1 })));
    const sent = JSON.parse(provider.requests[0]!.body).messages;
    expect(sent[0]).to.deep.equal({ role: 'system', content: 'be brief' });
    expect(sent[2].content).to.include('Here it is.').and.to.include('projectId prj_1');
    expect(sent[4]).to.deep.equal({
      role: 'assistant',
      content: null,
      tool_calls: [
        {
          id: 'call_9',
          type: 'function',
          function: { name: 'add_flowchart_steps', arguments: '{"projectId":"prj_1","steps":["Reference checks"]}' },
        },
      ],
    });
    expect(sent[5]).to.deep.equal({ role: 'tool', tool_call_id: 'call_9', content: JSON.stringify(flow) });
  });

  it('when the provider answers 500, then the step fails with engine_unavailable naming the status, never the key', async () => {
    provider = await fakeServer((_req, res) => {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `upstream exploded for key ${KEY}` } }));
    });
    const err = await failure(collect(engineFor(provider.url).step(input())));
    expect(err).to.be.instanceOf(EngineError);
    expect((err as EngineError).code).to.equal('engine_unavailable');
    expect((err as EngineError).message).to.match(/^the assistant provider answered 500/);
    expect((err as EngineError).message).not.to.include(KEY);
  });

  it('when nothing listens at the base URL, then the step fails with engine_unavailable', async () => {
    const err = await failure(collect(engineFor('http://127.0.0.1:1').step(input())));
    expect(err).to.be.instanceOf(EngineError);
    expect((err as EngineError).code).to.equal('engine_unavailable');
  });

  it('when the provider stalls mid-stream, then the step fails with engine_timeout within CHAT_TIMEOUT_MS', async () => {
    provider = await fakeServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`data: ${JSON.stringify(chunk({ content: 'Thinking' }))}\n\n`);
      // …and nothing more.
    });
    const started = Date.now();
    const seen: EngineEvent[] = [];
    const err = await failure(
      (async () => {
        for await (const ev of engineFor(provider!.url, { CHAT_TIMEOUT_MS: '400' }).step(input())) seen.push(ev);
      })(),
    );
    const took = Date.now() - started;
    expect(seen).to.deep.equal([{ type: 'text-delta', delta: 'Thinking' }]);
    expect((err as EngineError).code).to.equal('engine_timeout');
    expect(took).to.be.within(350, 1500);
  });

  it('when the stream ends without [DONE] or a finish reason, then the step fails with engine_unavailable', async () => {
    provider = await fakeServer((_req, res) => stream(res, [chunk({ content: 'Half' })]));
    const err = await failure(collect(engineFor(provider.url).step(input())));
    expect((err as EngineError).code).to.equal('engine_unavailable');
  });

  it('when the caller aborts, then the request to the provider stops at once', async () => {
    let closed!: () => void;
    const gone = new Promise<void>((r) => (closed = r));
    provider = await fakeServer((_req: Recorded, res) => {
      res.on('close', () => closed());
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`data: ${JSON.stringify(chunk({ content: 'Hello' }))}\n\n`);
    });
    const ctrl = new AbortController();
    const seen: EngineEvent[] = [];
    const started = Date.now();
    const err = await failure(
      (async () => {
        for await (const ev of engineFor(provider!.url, { CHAT_TIMEOUT_MS: '10000' }).step(
          input({ signal: ctrl.signal }),
        )) {
          seen.push(ev);
          setTimeout(() => ctrl.abort(new Error('client went away')), 20);
        }
      })(),
    );
    expect(Date.now() - started).to.be.lessThan(1000);
    expect((err as Error).message).to.equal('client went away');
    expect(seen).to.have.length(1);
    await gone; // the provider saw its connection closed
  });
});
