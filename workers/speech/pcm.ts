/**
 * Streaming PCM plumbing of the speech pool: a WAV reader for a stream whose header lies about
 * its length (espeak-ng writes 0x7ffff000 because it does not know it yet), and a band-limited
 * resampler to 24 kHz mono. Both work chunk by chunk so audio leaves as it is produced.
 */

export interface PcmFormat {
  sampleRate: number;
  channels: number;
}

/**
 * Reads a RIFF/WAVE stream of 16-bit PCM: `push` returns the sample bytes that followed the
 * header so far (nothing until the header is complete). The `data` chunk's length is ignored:
 * everything after its header is audio until the stream ends.
 */
export class WavStreamReader {
  private head = Buffer.alloc(0);
  format?: PcmFormat;
  private inData = false;

  push(chunk: Buffer): Buffer {
    if (this.inData) return chunk;
    this.head = Buffer.concat([this.head, chunk]);
    const b = this.head;
    if (b.length < 12) return Buffer.alloc(0);
    if (b.toString('ascii', 0, 4) !== 'RIFF' || b.toString('ascii', 8, 12) !== 'WAVE')
      throw new Error('the synthesiser did not write a WAV stream');
    let at = 12;
    while (at + 8 <= b.length) {
      const id = b.toString('ascii', at, at + 4);
      const size = b.readUInt32LE(at + 4);
      if (id === 'data') {
        if (!this.format) throw new Error('WAV stream has no fmt chunk before its data');
        this.inData = true;
        const rest = b.subarray(at + 8);
        this.head = Buffer.alloc(0);
        return rest;
      }
      if (at + 8 + size > b.length) return Buffer.alloc(0); // this chunk is not complete yet
      if (id === 'fmt ') {
        const audioFormat = b.readUInt16LE(at + 8);
        const bits = b.readUInt16LE(at + 22);
        if (audioFormat !== 1 || bits !== 16)
          throw new Error(`WAV stream is not 16-bit PCM (format ${audioFormat}, ${bits} bits)`);
        this.format = { channels: b.readUInt16LE(at + 10), sampleRate: b.readUInt32LE(at + 12) };
      }
      at += 8 + size + (size & 1);
    }
    return Buffer.alloc(0);
  }
}

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/** Taps on each side of an output sample, in input samples, when upsampling. */
const HALF_TAPS = 16;

/**
 * Hand-written on purpose: ffmpeg (the maintained tool we have) cost about 65 ms of process start
 * per call, more than espeak-ng takes for a whole sentence, and buffered or dropped output when
 * read from a pipe with low-latency flags; the npm resamplers we found are native addons or
 * whole-buffer. The test compares this one with ffmpeg's output (correlation > 0.9999, same length).
 * Rational polyphase resampler (windowed sinc, Blackman window, 16 zero crossings a side) from
 * s16le PCM at any rate and channel count to s16le mono at `outRate`. Channels are averaged.
 * The cut-off sits at 92% of the lower Nyquist frequency, so upsampling 22.05 → 24 kHz adds no
 * images above 10.1 kHz and downsampling does not alias. Delay: HALF_TAPS input samples (0.7 ms
 * at 22.05 kHz) before the first output leaves; `end()` flushes the tail, so the output holds
 * exactly ceil(inputSamples × outRate / inRate) samples, the same duration as the input.
 */
export class PcmResampler {
  private readonly L: number;
  private readonly M: number;
  private readonly half: number;
  /** Taps of every phase, phase after phase (2 × half each). */
  private readonly table: Float64Array;
  private readonly frameBytes: number;
  private carry = Buffer.alloc(0);
  /** Input samples not yet consumed; buf[0] is input sample number `base` (negative: the zero padding before the start). */
  private buf: Float64Array;
  private len = 0;
  private base: number;
  private n = 0;
  private total = 0;

  constructor(
    private readonly input: PcmFormat,
    outRate: number,
  ) {
    const g = gcd(input.sampleRate, outRate);
    this.L = outRate / g;
    this.M = input.sampleRate / g;
    const ratio = Math.min(1, this.L / this.M);
    this.half = Math.ceil(HALF_TAPS / ratio);
    const fc = 0.5 * ratio * 0.92; // cycles per input sample
    this.table = new Float64Array(this.L * 2 * this.half);
    for (let phase = 0; phase < this.L; phase++) {
      const taps = new Float64Array(2 * this.half);
      let sum = 0;
      for (let j = 0; j < taps.length; j++) {
        const d = j - this.half + 1 - phase / this.L; // distance from the output instant, in input samples
        const x = 2 * fc * d;
        const sinc = x === 0 ? 1 : Math.sin(Math.PI * x) / (Math.PI * x);
        const w =
          Math.abs(d) >= this.half
            ? 0
            : 0.42 + 0.5 * Math.cos((Math.PI * d) / this.half) + 0.08 * Math.cos((2 * Math.PI * d) / this.half);
        taps[j] = sinc * w;
        sum += taps[j]!;
      }
      for (let j = 0; j < taps.length; j++) taps[j]! /= sum; // unity gain at DC for every phase
      this.table.set(taps, phase * taps.length);
    }
    this.frameBytes = 2 * input.channels;
    this.buf = new Float64Array(4096);
    // Zeros before the first sample, so the first outputs have their left-hand taps.
    this.len = this.half;
    this.base = -this.half;
  }

  /** Resample the next bytes; returns what can be computed so far (possibly nothing). */
  push(chunk: Buffer): Buffer {
    let bytes = this.carry.length ? Buffer.concat([this.carry, chunk]) : chunk;
    const whole = bytes.length - (bytes.length % this.frameBytes);
    this.carry = Buffer.from(bytes.subarray(whole));
    bytes = bytes.subarray(0, whole);
    const frames = whole / this.frameBytes;
    this.reserve(frames);
    const ch = this.input.channels;
    const samples = new Int16Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + whole));
    const buf = this.buf;
    let len = this.len;
    for (let f = 0; f < frames; f++) {
      let s = 0;
      for (let c = 0; c < ch; c++) s += samples[f * ch + c]!;
      buf[len++] = s / ch;
    }
    this.len = len;
    this.total += frames;
    return this.produce(false);
  }

  /** The stream ended: the remaining output, with zeros past the last input sample. */
  end(): Buffer {
    this.reserve(this.half + 1);
    for (let i = 0; i <= this.half; i++) this.buf[this.len++] = 0;
    return this.produce(true);
  }

  private reserve(extra: number) {
    if (this.len + extra <= this.buf.length) return;
    const next = new Float64Array(Math.max(this.buf.length * 2, this.len + extra));
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
  }

  private produce(final: boolean): Buffer {
    // Outputs computable now: those whose last tap is already here (all of them at the end).
    const available = this.base + this.len; // one past the last input index held
    let upTo = Math.floor(((available - this.half) * this.L) / this.M); // last n whose taps fit, roughly
    // Output n reads input up to floor(n·M/L) + half, which must be below `available`.
    while (upTo >= this.n && Math.floor((upTo * this.M) / this.L) + this.half >= available) upTo--;
    while (Math.floor(((upTo + 1) * this.M) / this.L) + this.half < available) upTo++;
    let count = Math.max(0, upTo - this.n + 1);
    if (final) count = Math.min(count, Math.max(0, Math.ceil((this.total * this.L) / this.M) - this.n));
    const out = new Int16Array(count);
    const width = 2 * this.half;
    const { L, M, buf, table } = this;
    const offset = 1 - this.half - this.base;
    let n = this.n;
    for (let k = 0; k < count; k++, n++) {
      const t = ((n * M) % L) * width;
      const at = Math.floor((n * M) / L) + offset;
      let acc = 0;
      for (let j = 0; j < width; j++) acc += table[t + j]! * buf[at + j]!;
      out[k] = acc >= 32767 ? 32767 : acc <= -32768 ? -32768 : Math.round(acc);
    }
    this.n = n;
    // Drop input no later output needs.
    const keepFrom = Math.floor((this.n * this.M) / this.L) - this.half + 1 - this.base;
    if (keepFrom > 0) {
      this.buf.copyWithin(0, keepFrom, this.len);
      this.len -= keepFrom;
      this.base += keepFrom;
    }
    // Int16Array is platform-endian; every platform Node runs on here is little-endian (checked at load).
    return Buffer.from(out.buffer, out.byteOffset, out.byteLength);
  }
}

if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1)
  throw new Error('the speech resampler assumes a little-endian platform');
