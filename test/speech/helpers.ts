import { spawn } from 'node:child_process';

export interface StreamedAnswer {
  status: number;
  headers: Headers;
  body: Buffer;
  /** performance.now() of each body chunk the client read, from the request's start. */
  chunkAt: number[];
  /** Set when reading the body failed (the server cut the stream). */
  error?: Error;
  /** The body as JSON when it is an error answer. */
  json?: any;
}

/** POST /speech read as a stream: every chunk and when it arrived. */
export async function postSpeech(
  baseUrl: string,
  key: string,
  body: unknown,
  onChunk?: (bytesSoFar: number) => void,
): Promise<StreamedAnswer> {
  const t0 = performance.now();
  const res = await fetch(`${baseUrl}/speech`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const parts: Buffer[] = [];
  const chunkAt: number[] = [];
  let error: Error | undefined;
  let n = 0;
  try {
    for await (const c of res.body as unknown as AsyncIterable<Uint8Array>) {
      chunkAt.push(performance.now() - t0);
      parts.push(Buffer.from(c));
      n += c.length;
      onChunk?.(n);
    }
  } catch (err) {
    error = err as Error;
  }
  const out: StreamedAnswer = { status: res.status, headers: res.headers, body: Buffer.concat(parts), chunkAt, error };
  if (res.headers.get('content-type')?.startsWith('application/json')) out.json = JSON.parse(out.body.toString('utf8'));
  return out;
}

/** s16le bytes → samples. */
export const samplesOf = (pcm: Buffer) =>
  new Int16Array(pcm.buffer.slice(pcm.byteOffset, pcm.byteOffset + pcm.length - (pcm.length % 2)));

export function rms(s: Int16Array): number {
  let acc = 0;
  for (const v of s) acc += v * v;
  return Math.sqrt(acc / Math.max(1, s.length));
}

/** Run a binary, text on stdin, and collect stdout. */
export function run(bin: string, args: string[], stdin?: Buffer | string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let err = '';
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve(Buffer.concat(out)) : reject(new Error(`${bin} exited ${code}: ${err.slice(-300)}`)),
    );
    child.stdin.end(stdin ?? '');
  });
}

/** The reference: espeak-ng run directly on the text (a WAV at its own rate), and its sample count and rate. */
export async function espeakDirect(
  text: string,
  voice: string,
): Promise<{ wav: Buffer; samples: number; rate: number }> {
  const wav = await run('espeak-ng', ['-v', voice, '--stdout', '-b', '1'], text);
  const rate = wav.readUInt32LE(24);
  const dataAt = wav.indexOf('data', 12, 'ascii');
  return { wav, samples: (wav.length - dataAt - 8) / 2, rate };
}

/** Pearson correlation of two sample arrays over their common length. */
export function correlation(a: Int16Array, b: Int16Array): number {
  const n = Math.min(a.length, b.length);
  let ab = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < n; i++) {
    ab += a[i]! * b[i]!;
    aa += a[i]! * a[i]!;
    bb += b[i]! * b[i]!;
  }
  return ab / Math.sqrt(aa * bb);
}

/** A 24 kHz s16le sine tone (what a fake provider streams). */
export function tone(seconds: number, hz = 440, amplitude = 8000): Buffer {
  const n = Math.round(seconds * 24_000);
  const b = Buffer.alloc(n * 2);
  for (let i = 0; i < n; i++) b.writeInt16LE(Math.round(amplitude * Math.sin((2 * Math.PI * hz * i) / 24_000)), i * 2);
  return b;
}
