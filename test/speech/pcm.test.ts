import { expect } from 'chai';
import { secondSentenceAt } from '../../contracts/speech';
import { PcmResampler, WavStreamReader } from '../../workers/speech/pcm';
import { correlation, espeakDirect, run, samplesOf } from './helpers';

const sine = (rate: number, seconds: number, hz: number, channels = 1) => {
  const n = Math.round(rate * seconds);
  const b = Buffer.alloc(n * 2 * channels);
  for (let i = 0; i < n; i++)
    for (let c = 0; c < channels; c++)
      b.writeInt16LE(Math.round(10_000 * Math.sin((2 * Math.PI * hz * i) / rate)), (i * channels + c) * 2);
  return b;
};
const zeroCrossings = (s: Int16Array) => {
  let n = 0;
  for (let i = 1; i < s.length; i++) if (s[i - 1]! < 0 !== s[i]! < 0) n++;
  return n;
};

describe('speech: the streaming WAV reader and resampler (workers/speech/pcm.ts)', () => {
  it("when espeak-ng output is fed in pieces of any size, then the result is the same as in one piece, as long as the input in time, and matches ffmpeg's resampling", async () => {
    const { wav, samples, rate } = await espeakDirect('Resampling should not change the length of speech.', 'en-us');
    const once = (() => {
      const r = new WavStreamReader();
      const pcm = r.push(wav);
      const rs = new PcmResampler(r.format!, 24_000);
      return Buffer.concat([rs.push(pcm), rs.end()]);
    })();
    for (const piece of [1, 3, 441, 4096]) {
      const r = new WavStreamReader();
      let rs: PcmResampler | undefined;
      const out: Buffer[] = [];
      for (let i = 0; i < wav.length; i += piece) {
        const pcm = r.push(wav.subarray(i, i + piece));
        if (!pcm.length) continue;
        rs ??= new PcmResampler(r.format!, 24_000);
        out.push(rs.push(pcm));
      }
      out.push(rs!.end());
      expect(Buffer.concat(out).equals(once), `pieces of ${piece}`).to.equal(true);
    }
    expect(once.length / 2).to.equal(Math.ceil((samples * 24_000) / rate));
    const ffmpeg = samplesOf(
      await run(
        'ffmpeg',
        [
          '-hide_banner',
          '-loglevel',
          'error',
          '-f',
          'wav',
          '-i',
          'pipe:0',
          '-ar',
          '24000',
          '-ac',
          '1',
          '-f',
          's16le',
          'pipe:1',
        ],
        wav,
      ),
    );
    expect(ffmpeg.length).to.equal(once.length / 2);
    expect(correlation(samplesOf(once), ffmpeg)).to.be.above(0.9999);
  });

  it('when a tone is resampled up or down (stereo averaged), then its pitch and level are kept', () => {
    for (const [rate, channels] of [
      [22_050, 1],
      [16_000, 1],
      [44_100, 2],
      [48_000, 2],
    ] as const) {
      const rs = new PcmResampler({ sampleRate: rate, channels }, 24_000);
      const out = samplesOf(Buffer.concat([rs.push(sine(rate, 1, 1000, channels)), rs.end()]));
      expect(out.length, `${rate}`).to.equal(24_000);
      // 1 kHz for one second: 2000 zero crossings, give or take the edges.
      expect(zeroCrossings(out), `${rate}`).to.be.within(1995, 2002);
      const peak = Math.max(...out.subarray(1000, 23_000).map(Math.abs));
      expect(peak, `${rate}`).to.be.within(9800, 10_200);
    }
  });

  it('when a text is checked for a second sentence, then abbreviations, initials and decimals do not end one', () => {
    expect(secondSentenceAt('It rained. Then it stopped.')).to.equal(11);
    expect(secondSentenceAt('Really?! Yes.')).to.equal(9);
    expect(secondSentenceAt('今日は晴れです。明日は雨です。')).to.equal(8);
    for (const one of [
      'Dr. Who and Mr. Smith met at 3.30 p.m. today.',
      'J. R. R. Tolkien wrote it.',
      'Is it done?',
      'Wait...',
      'Ha! ',
      '今日は晴れです。',
    ])
      expect(secondSentenceAt(one), one).to.equal(-1);
  });
});
