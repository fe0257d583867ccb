import { expect } from 'chai';
import { TurnDetection } from '../../contracts/live';
import { EnergyVad, rmsOf } from '../../platform/live/vad';
import { addresses, speakableSentences } from '../../api/live/realtime';
import { tone } from './helpers';
import { createLiveEngine } from '../../platform/live/engine';
import { loadConfig } from '../../platform/infra/config';

describe('live: energy voice activity detection on synthetic PCM', () => {
  const defaults = TurnDetection.parse({});

  it('when only silence or quiet noise arrives, then no turn starts', () => {
    const vad = new EnergyVad(defaults);
    expect(vad.push(tone(2000, 0))).to.deep.equal([]);
    expect(vad.push(tone(2000, 300))).to.deep.equal([]); // RMS ≈ 212, under 500
    expect(vad.inTurn).to.equal(false);
  });

  it('when a tone is followed by enough silence, then one turn ends holding the tone, in frames of any size', () => {
    const vad = new EnergyVad(defaults);
    const audio = Buffer.concat([tone(300, 0), tone(1000, 8000), tone(800, 0)]);
    const events = [];
    for (let at = 0; at < audio.length; at += 1234) events.push(...vad.push(audio.subarray(at, at + 1234)));
    expect(events.map((e) => e.type)).to.deep.equal(['speech-start', 'turn-end']);
    const end = events[1] as Extract<(typeof events)[number], { type: 'turn-end' }>;
    expect(end.reason).to.equal('silence');
    expect(end.speechMs).to.be.within(980, 1020);
    // 200 ms kept before the speech, the tone, and the 700 ms of silence that ended it.
    expect(end.audio.length / 48).to.be.within(1880, 1920);
    expect(rmsOf(end.audio)).to.be.above(4000);
  });

  it('when the silence is shorter than silenceMs, then the turn goes on; a click shorter than minSpeechMs is no turn', () => {
    const vad = new EnergyVad({ ...defaults, silenceMs: 500 });
    const events = vad.push(Buffer.concat([tone(400, 8000), tone(300, 0), tone(400, 8000), tone(600, 0)]));
    expect(events.map((e) => e.type)).to.deep.equal(['speech-start', 'turn-end']);
    const click = new EnergyVad(defaults).push(Buffer.concat([tone(40, 8000), tone(1000, 0)]));
    expect(click.map((e) => e.type)).to.deep.equal(['speech-start']);
  });

  it('when speech goes on past maxTurnMs, then the turn ends there (bounded memory)', () => {
    const vad = new EnergyVad({ ...defaults, maxTurnMs: 1000 });
    const events = vad.push(tone(2500, 8000));
    const ends = events.filter((e) => e.type === 'turn-end');
    expect(ends).to.have.length(2);
    expect(ends[0]).to.include({ reason: 'max_length' });
  });

  it('splits replies into speakable sentences and matches the device name as a word', () => {
    expect(
      speakableSentences('Done: I made the **deck** [Roadmap](http://x/y). It is at https://x/p ready! '),
    ).to.deep.equal(['Done: I made the deck Roadmap.', 'It is at ready!']);
    expect(speakableSentences(`${'word '.repeat(100)}end.`).every((s) => s.length <= 300)).to.equal(true);
    expect(addresses('Hey robo, what time is it?', 'Robo')).to.equal(true);
    expect(addresses('the roboticist said', 'Robo')).to.equal(false);
  });
});

describe("live: the offline engine's live intents", () => {
  it('recognises memory, account, project and device requests, and leaves the rest to the chat planner', async () => {
    const engine = createLiveEngine(loadConfig({ NODE_ENV: 'test' }));
    const tools = [
      'remember',
      'recall',
      'get_account',
      'list_projects',
      'get_device_status',
      'set_volume',
      'create_flowchart',
    ].map((name) => ({ name, description: '', parameters: {} }));
    const first = async (text: string) => {
      for await (const ev of engine.step({
        messages: [{ role: 'user', content: text }],
        tools,
        mode: 'fast',
        stepIndex: 0,
        signal: new AbortController().signal,
      })) {
        if (ev.type === 'tool-call') return [ev.call.name, ev.call.args];
      }
      return null;
    };
    expect(await first('Remember that the keys are in the drawer.')).to.deep.equal([
      'remember',
      { text: 'the keys are in the drawer' },
    ]);
    expect(await first('Robo, what do you remember about the keys?')).to.deep.equal(['recall', { query: 'the keys' }]);
    expect(await first('how many credits do I have')).to.deep.equal(['get_account', {}]);
    expect(await first('list my projects')).to.deep.equal(['list_projects', {}]);
    expect(await first('set the volume to 40')).to.deep.equal(['set_volume', { level: 40 }]);
    expect((await first('make a flowchart of the product recall plan so we remember it'))?.[0]).to.equal(
      'create_flowchart',
    );
  });
});
