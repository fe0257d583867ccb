import { expect } from 'chai';
import { z } from 'zod';
import type { AuthAccount } from '../../platform/accounts/accounts';
import { EngineError, type EngineEvent } from '../../platform/assistant/engine';
import type { ToolContext, ToolDefinition } from '../../platform/assistant/tool';
import { MAX_STEPS, runTurn } from '../../platform/assistant/turn';
import type { TurnEvent } from '../../platform/assistant/turn-events';
import { scriptedEngine } from './scripted-engine';

const account = {
  _id: 'acc_test',
  name: 't',
  plan: 'pro',
  features: { whiteLabel: false },
  createdAt: new Date(),
} as unknown as AuthAccount;
const baseCtx = { account, key: { scopes: ['ai' as const] }, requestId: 'req_1', turnId: 'msg_turn1' };

/** A tool that records its calls and the ids it was handed. */
function recordingTool(
  name = 'make_note',
  opts: { wait?: (ctx: ToolContext) => Promise<void>; scope?: ToolDefinition['scope'] } = {},
) {
  const calls: { args: { title: string; words: number }; ids: string[]; signal: AbortSignal }[] = [];
  const def: ToolDefinition<{ title: string; words: number }> = {
    name,
    description: 'make a note',
    input: z.object({ title: z.string().min(1), words: z.number().int().default(10) }),
    scope: opts.scope ?? 'ai',
    spends: [],
    async run(args, ctx) {
      const ids = [ctx.idFor('prj'), ctx.idFor('prj'), ctx.idFor('card')];
      calls.push({ args, ids, signal: ctx.signal });
      await opts.wait?.(ctx);
      return {
        type: 'notes',
        title: args.title,
        projectId: ids[0],
        projectType: 'notes',
        openUrl: `http://x/notes/${ids[0]}`,
      };
    },
  };
  return { def, calls };
}

async function collect(gen: AsyncIterable<TurnEvent>) {
  const out: TurnEvent[] = [];
  for await (const ev of gen) out.push(ev);
  return out;
}

const call = (id: string, name: string, args: unknown): EngineEvent => ({
  type: 'tool-call',
  call: { id, name, args },
});

describe('runTurn (platform/assistant/turn.ts) with a scripted engine', () => {
  it('when a step asks for a tool, then the events come in stream order, the artifact feeds the next step, and the turn ends when a step asks for none', async () => {
    const tool = recordingTool();
    const { engine, seen } = scriptedEngine([
      [
        { type: 'text-delta', delta: 'On it. ' },
        { type: 'tool-call-start', id: 'c1', name: 'make_note' },
        call('c1', 'make_note', { title: 'Hiring' }),
        { type: 'usage', inputTokens: 10, outputTokens: 5 },
      ],
      [
        { type: 'text-delta', delta: 'Made ' },
        { type: 'text-delta', delta: 'Hiring.' },
        { type: 'usage', inputTokens: 20, outputTokens: null },
      ],
    ]);
    const events = await collect(
      runTurn({
        engine,
        tools: [tool.def],
        messages: [{ role: 'user', content: 'note please' }],
        mode: 'fast',
        ctx: baseCtx,
      }),
    );
    expect(events.map((e) => e.type)).to.deep.equal([
      'step-start',
      'text-start',
      'text-delta',
      'text-end',
      'tool-input-start',
      'tool-input-available',
      'tool-output-available',
      'step-finish',
      'step-start',
      'text-start',
      'text-delta',
      'text-delta',
      'text-end',
      'step-finish',
      'turn-finish',
    ]);
    const textIds = events.filter((e) => e.type.startsWith('text-')).map((e) => (e as { id: string }).id);
    expect(new Set(textIds.slice(0, 3)).size).to.equal(1);
    expect(new Set(textIds.slice(3)).size).to.equal(1);
    expect(textIds[0]).to.not.equal(textIds[3]);
    // Validated input, default filled in; the tool-input-start is sent once although the engine announced it.
    expect(events.find((e) => e.type === 'tool-input-available')).to.deep.include({
      toolCallId: 'c1',
      toolName: 'make_note',
      input: { title: 'Hiring', words: 10 },
    });
    const fin = events.at(-1) as Extract<TurnEvent, { type: 'turn-finish' }>;
    expect(fin.text).to.equal('On it. \n\nMade Hiring.');
    expect(fin.steps).to.equal(2);
    expect(fin.usage).to.deep.equal({ inputTokens: 30, outputTokens: 5 });
    expect(fin.engine.model).to.equal('script-v1');
    expect(fin.artifacts).to.have.length(1);
    // Step 1 saw the assistant's call and the tool's artifact.
    const m = seen[1]!.messages;
    expect(m.at(-2)).to.deep.include({ role: 'assistant', content: 'On it. ' });
    expect((m.at(-2) as { toolCalls: unknown[] }).toolCalls).to.have.length(1);
    expect(m.at(-1)).to.deep.include({ role: 'tool', toolCallId: 'c1', name: 'make_note' });
    expect(seen[0]!.tools.map((t) => t.name)).to.deep.equal(['make_note']);
  });

  it("when the key lacks a tool's scope, then the engine is not offered it, a call of it anyway runs nothing and answers a forbidden error artifact, and the turn finishes", async () => {
    const made = recordingTool('make_note');
    const edit = recordingTool('edit_note', { scope: 'write' });
    const { engine, seen } = scriptedEngine([
      [call('c1', 'edit_note', { title: 'x' })],
      [{ type: 'text-delta', delta: 'I may not.' }],
    ]);
    const events = await collect(
      runTurn({
        engine,
        tools: [made.def, edit.def],
        messages: [{ role: 'user', content: 'edit it' }],
        mode: 'fast',
        ctx: baseCtx,
      }),
    );
    expect(seen[0]!.tools.map((t) => t.name)).to.deep.equal(['make_note']);
    expect(edit.calls).to.have.length(0);
    const out = events.find((e) => e.type === 'tool-output-available') as Extract<
      TurnEvent,
      { type: 'tool-output-available' }
    >;
    expect(out.output.type).to.equal('error');
    expect(out.output.data).to.include({ code: 'forbidden', tool: 'edit_note', scope: 'write' });
    expect(String(out.output.data?.message)).to.match(/needs the write scope/);
    expect(events.at(-1)!.type).to.equal('turn-finish');
    // With the scope it is offered and runs.
    const { engine: e2, seen: s2 } = scriptedEngine([
      [call('c1', 'edit_note', { title: 'x' })],
      [{ type: 'text-delta', delta: 'Done.' }],
    ]);
    await collect(
      runTurn({
        engine: e2,
        tools: [made.def, edit.def],
        messages: [{ role: 'user', content: 'edit it' }],
        mode: 'fast',
        ctx: { ...baseCtx, key: { scopes: ['ai', 'write'] } },
      }),
    );
    expect(s2[0]!.tools.map((t) => t.name)).to.deep.equal(['make_note', 'edit_note']);
    expect(edit.calls).to.have.length(1);
  });

  it('when the same turn and call run again (a replay), then the tool gets the same ids; another call or turn gets others; repeated prefixes differ', async () => {
    const runOnce = async (turnId: string, callId: string) => {
      const tool = recordingTool();
      const { engine } = scriptedEngine([
        [call(callId, 'make_note', { title: 'x' })],
        [{ type: 'text-delta', delta: 'ok' }],
      ]);
      await collect(runTurn({ engine, tools: [tool.def], messages: [], mode: 'fast', ctx: { ...baseCtx, turnId } }));
      return tool.calls[0]!.ids;
    };
    const a = await runOnce('msg_a', 'c1');
    expect(await runOnce('msg_a', 'c1')).to.deep.equal(a);
    expect((await runOnce('msg_a', 'c2'))[0]).to.not.equal(a[0]);
    expect((await runOnce('msg_b', 'c1'))[0]).to.not.equal(a[0]);
    expect(a[0]).to.match(/^prj_[0-9a-z]{20}$/);
    expect(a[1]).to.not.equal(a[0]);
    expect(a[2]).to.match(/^card_/);
  });

  it('when the engine keeps asking for tools, then fast stops after 3 steps and think after 6, and the last step is offered no tools', async () => {
    for (const mode of ['fast', 'think'] as const) {
      const tool = recordingTool();
      let n = 0;
      const { engine, seen } = scriptedEngine([() => [call(`c${n++}`, 'make_note', { title: 'again' })]]);
      const events = await collect(runTurn({ engine, tools: [tool.def], messages: [], mode, ctx: baseCtx }));
      expect(seen).to.have.length(MAX_STEPS[mode]);
      expect(seen.at(-1)!.tools).to.deep.equal([]);
      expect(seen.slice(0, -1).every((s) => s.tools.length === 1)).to.equal(true);
      // A call made on the last step anyway is answered as an unknown tool, not run.
      expect(tool.calls).to.have.length(MAX_STEPS[mode] - 1);
      const outputs = events.filter((e) => e.type === 'tool-output-available') as Extract<
        TurnEvent,
        { type: 'tool-output-available' }
      >[];
      expect(outputs.at(-1)!.output.type).to.equal('error');
      expect((events.at(-1) as { steps: number }).steps).to.equal(MAX_STEPS[mode]);
    }
  });

  it('when a tool is unknown or its arguments are wrong, then its output is an error artifact naming the problem and the turn goes on', async () => {
    const tool = recordingTool();
    const { engine } = scriptedEngine([
      [call('c1', 'nope', {}), call('c2', 'make_note', { title: '' })],
      [{ type: 'text-delta', delta: 'sorry' }],
    ]);
    const events = await collect(runTurn({ engine, tools: [tool.def], messages: [], mode: 'fast', ctx: baseCtx }));
    const outs = events.filter((e) => e.type === 'tool-output-available') as Extract<
      TurnEvent,
      { type: 'tool-output-available' }
    >[];
    expect(outs.map((o) => o.output.type)).to.deep.equal(['error', 'error']);
    expect(outs[0]!.output.data).to.include({ code: 'unknown_tool' });
    expect(outs[1]!.output.data).to.include({ code: 'validation_error' });
    expect(String(outs[1]!.output.data!.message)).to.match(/title/);
    // The raw arguments are shown when they fail validation.
    expect(
      events.filter((e) => e.type === 'tool-input-available').map((e) => (e as { input: unknown }).input),
    ).to.deep.equal([{}, { title: '' }]);
    expect(tool.calls).to.have.length(0);
    expect(events.at(-1)!.type).to.equal('turn-finish');
  });

  it('when the engine fails mid-step, then an open text part is closed, one error event follows, and there is no turn-finish', async () => {
    const { engine } = scriptedEngine([
      async function* () {
        yield { type: 'text-delta', delta: 'Working' } as EngineEvent;
        throw new EngineError('the provider answered 500', 'engine_unavailable');
      },
    ]);
    const events = await collect(runTurn({ engine, tools: [], messages: [], mode: 'fast', ctx: baseCtx }));
    expect(events.map((e) => e.type)).to.deep.equal(['step-start', 'text-start', 'text-delta', 'text-end', 'error']);
    expect(events.at(-1)).to.deep.include({ errorText: 'the provider answered 500', code: 'engine_unavailable' });

    const unexpected: unknown[] = [];
    const broken = scriptedEngine([
      // biome-ignore lint/correctness/useYield: an engine that fails before its first event
      async function* () {
        throw new TypeError('secret detail');
      },
    ]);
    const ev2 = await collect(
      runTurn({
        engine: broken.engine,
        tools: [],
        messages: [],
        mode: 'fast',
        ctx: baseCtx,
        onUnexpectedError: (e) => unexpected.push(e),
      }),
    );
    expect(ev2.at(-1)).to.deep.include({ type: 'error', code: 'engine_error' });
    expect((ev2.at(-1) as { errorText: string }).errorText).to.not.match(/secret/);
    expect(unexpected).to.have.length(1);
  });

  it('when the signal aborts while a tool runs, then the tool gets the signal, no further event is yielded and later tools do not run', async () => {
    const abort = new AbortController();
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    const slow = recordingTool('slow_tool', {
      wait: (ctx) =>
        new Promise<void>((_resolve, reject) => {
          started();
          ctx.signal.addEventListener('abort', () => reject(new Error('aborted')));
        }),
    });
    const later = recordingTool('make_note');
    const { engine, seen } = scriptedEngine([
      [call('c1', 'slow_tool', { title: 'a' }), call('c2', 'make_note', { title: 'b' })],
      [{ type: 'text-delta', delta: 'done' }],
    ]);
    const events: TurnEvent[] = [];
    const done = (async () => {
      for await (const ev of runTurn({
        engine,
        tools: [slow.def, later.def],
        messages: [],
        mode: 'think',
        ctx: baseCtx,
        signal: abort.signal,
      }))
        events.push(ev);
    })();
    await running;
    abort.abort();
    await done;
    expect(slow.calls[0]!.signal.aborted).to.equal(true);
    expect(later.calls).to.have.length(0);
    expect(events.map((e) => e.type)).to.deep.equal([
      'step-start',
      'tool-input-start',
      'tool-input-available',
      'tool-input-start',
      'tool-input-available',
    ]);
    expect(seen).to.have.length(1);
  });
});
