import type { ChatEngine, EngineEvent, StepInput } from '../../platform/assistant/engine';

export type ScriptedStep = EngineEvent[] | ((input: StepInput) => AsyncIterable<EngineEvent> | EngineEvent[]);

/**
 * A ChatEngine that replays a script, one entry per step (the last entry repeats), and records
 * what each step was given: the turn runner's tests drive it without a model.
 */
export function scriptedEngine(steps: ScriptedStep[]) {
  const seen: StepInput[] = [];
  const engine: ChatEngine = {
    info: { assistantName: 'svc assistant', lab: 'test', labName: 'Scripted', model: 'script-v1' },
    async *step(input) {
      seen.push({ ...input, messages: [...input.messages] });
      const s = steps[Math.min(input.stepIndex, steps.length - 1)]!;
      const events = typeof s === 'function' ? s(input) : s;
      for await (const ev of events as AsyncIterable<EngineEvent>) yield ev;
    },
  };
  return { engine, seen };
}
