import type { TurnDetection } from '../../contracts/live';

/** 20 ms of 24 kHz mono s16le. */
export const VAD_FRAME_SAMPLES = 480;
const FRAME_BYTES = VAD_FRAME_SAMPLES * 2;
const FRAME_MS = 20;

/** RMS of s16le samples. */
export function rmsOf(pcm: Buffer, from = 0, to = pcm.length): number {
  let acc = 0;
  let n = 0;
  for (let i = from; i + 1 < to; i += 2) {
    const v = pcm.readInt16LE(i);
    acc += v * v;
    n++;
  }
  return n ? Math.sqrt(acc / n) : 0;
}

export type VadEvent =
  | { type: 'speech-start' }
  | { type: 'turn-end'; audio: Buffer; speechMs: number; reason: 'silence' | 'max_length' };

/**
 * Energy-based voice activity detection: each 20 ms frame is speech when its RMS reaches
 * `rmsThreshold`. A turn starts at the first speech frame (the 200 ms before it are kept, so
 * the first syllable is not clipped) and ends after `silenceMs` of silence, or at `maxTurnMs`.
 * Turns with less than `minSpeechMs` of speech are dropped (clicks). Memory is bounded by
 * maxTurnMs of audio.
 */
export class EnergyVad {
  private partial = Buffer.alloc(0);
  private lead: Buffer[] = [];
  private turn: Buffer[] = [];
  private turnBytes = 0;
  private speaking = false;
  private silentMs = 0;
  private speechMs = 0;

  constructor(private readonly opts: Pick<TurnDetection, 'rmsThreshold' | 'silenceMs' | 'minSpeechMs' | 'maxTurnMs'>) {}

  /** Whether a turn is under way (speech heard and not yet ended). */
  get inTurn(): boolean {
    return this.speaking;
  }

  push(pcm: Buffer): VadEvent[] {
    const out: VadEvent[] = [];
    let buf = this.partial.length ? Buffer.concat([this.partial, pcm]) : pcm;
    let at = 0;
    for (; at + FRAME_BYTES <= buf.length; at += FRAME_BYTES) {
      const frame = Buffer.from(buf.subarray(at, at + FRAME_BYTES));
      const loud = rmsOf(frame) >= this.opts.rmsThreshold;
      if (!this.speaking) {
        this.lead.push(frame);
        if (this.lead.length > 10) this.lead.shift();
        if (!loud) continue;
        this.speaking = true;
        this.turn = this.lead;
        this.turnBytes = this.lead.length * FRAME_BYTES;
        this.lead = [];
        this.silentMs = 0;
        this.speechMs = FRAME_MS;
        out.push({ type: 'speech-start' });
        continue;
      }
      this.turn.push(frame);
      this.turnBytes += FRAME_BYTES;
      if (loud) {
        this.speechMs += FRAME_MS;
        this.silentMs = 0;
      } else this.silentMs += FRAME_MS;
      const tooLong = (this.turnBytes / FRAME_BYTES) * FRAME_MS >= this.opts.maxTurnMs;
      if (this.silentMs >= this.opts.silenceMs || tooLong) {
        const audio = Buffer.concat(this.turn);
        const speechMs = this.speechMs;
        const reason = this.silentMs >= this.opts.silenceMs ? 'silence' : 'max_length';
        this.reset();
        if (speechMs >= this.opts.minSpeechMs) out.push({ type: 'turn-end', audio, speechMs, reason });
      }
    }
    buf = buf.subarray(at);
    this.partial = Buffer.from(buf);
    return out;
  }

  private reset() {
    this.turn = [];
    this.turnBytes = 0;
    this.speaking = false;
    this.silentMs = 0;
    this.speechMs = 0;
  }
}
