/**
 * Speech benchmark, against the real RabbitMQ and FerretDB on this machine:
 *  baseline: espeak-ng run directly (a child process, text on stdin, WAV on stdout, no resampling),
 *    its time to first byte and real-time factor (audio seconds / wall seconds);
 *  POST /speech through the whole path (HTTP → API, credit hold → RabbitMQ → one speech worker
 *    process: espeak-ng + 24 kHz resampling → PCM chunks over RabbitMQ → chunked HTTP), the same
 *    texts: time to first body byte and real-time factor, one client at a time;
 *  and the aggregate real-time factor with several clients at once (audio seconds delivered per
 *    wall second).
 * Direct and HTTP runs alternate per request, so machine load falls on both alike. The API runs
 * in this process; the worker is a separate `tsx workers/main.ts` process with WORKER_POOLS=speech.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { startStack, type Stack } from '../harness/stack';
import { percentile } from './load';
import { row, type Bench, type BenchRow } from './bench';
import { spawnResponderWorker } from './processes';

const N = Number(process.env.BENCH_SPEECH_REQUESTS ?? 30);
const CONCURRENCY = Number(process.env.BENCH_SPEECH_CONCURRENCY ?? 8);

const TEXTS = {
  short: 'Hello there, how are you today?',
  long: 'When the long summer evening finally settled over the quiet harbour town, the fishermen pulled their boats onto the shingle, mended the torn nets by lantern light, and told each other slow stories about storms they had weathered decades ago, while the children listened from the sea wall.',
} as const;

interface Timing {
  ttfbMs: number;
  wallMs: number;
  audioSeconds: number;
}

/** espeak-ng directly: the same voice as the default (en-us+f3), at its own 22.05 kHz. */
function espeakDirect(text: string): Promise<Timing> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    let first = 0;
    let bytes = 0;
    const child = spawn('espeak-ng', ['-v', 'en-us+f3', '--stdout', '-b', '1'], { stdio: ['pipe', 'pipe', 'ignore'] });
    child.stdout.on('data', (d: Buffer) => {
      first ||= performance.now() - t0;
      bytes += d.length;
    });
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0
        ? resolve({ ttfbMs: first, wallMs: performance.now() - t0, audioSeconds: (bytes - 44) / 2 / 22_050 })
        : reject(new Error(`espeak-ng exited ${code}`)),
    );
    child.stdin.end(text);
  });
}

async function overHttp(stack: Stack, key: string, text: string): Promise<Timing> {
  const t0 = performance.now();
  const res = await fetch(`${stack.baseUrl}/speech`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ text }),
  });
  if (res.status !== 200) throw new Error(`POST /speech answered ${res.status}: ${await res.text()}`);
  let first = 0;
  let bytes = 0;
  for await (const c of res.body as unknown as AsyncIterable<Uint8Array>) {
    first ||= performance.now() - t0;
    bytes += c.length;
  }
  return { ttfbMs: first, wallMs: performance.now() - t0, audioSeconds: bytes / 2 / 24_000 };
}

const median = (xs: number[]) => percentile(xs, 50);
const rtf = (ts: Timing[]) => median(ts.map((t) => t.audioSeconds / (t.wallMs / 1000)));

export const bench: Bench = {
  name: 'speech (POST /speech vs espeak-ng directly: time to first byte, real-time factor)',
  async run(): Promise<BenchRow[]> {
    const rows: BenchRow[] = [];
    const stack = await startStack({ workers: false, scheduler: false, env: { RATE_LIMIT_MAX: '1000000' } });
    let worker: ChildProcess | undefined;
    try {
      worker = await spawnResponderWorker(stack.config, 'speech', CONCURRENCY);
      const { key } = await stack.createAccount({ credits: 1_000_000 });
      for (let i = 0; i < 5; i++) {
        await espeakDirect(TEXTS.short);
        await overHttp(stack, key, TEXTS.short);
      }
      for (const [label, text] of Object.entries(TEXTS)) {
        const direct: Timing[] = [];
        const http: Timing[] = [];
        for (let i = 0; i < N; i++) {
          direct.push(await espeakDirect(text));
          http.push(await overHttp(stack, key, text));
        }
        const audio = http[0]!.audioSeconds.toFixed(1);
        const base = median(direct.map((t) => t.ttfbMs));
        rows.push(
          row(
            `/speech time to first byte, ${label} (${text.length} chars, ${audio} s audio), median`,
            median(http.map((t) => t.ttfbMs)),
            'ms',
            base,
            `baseline = espeak-ng's first stdout byte; p99 ${percentile(
              http.map((t) => t.ttfbMs),
              99,
            ).toFixed(
              1,
            )} ms; total ${median(http.map((t) => t.wallMs)).toFixed(1)} ms vs ${median(direct.map((t) => t.wallMs)).toFixed(1)} ms`,
          ),
        );
        rows.push(
          row(
            `/speech real-time factor, ${label}, one client, median`,
            rtf(http),
            '× real time',
            rtf(direct),
            'audio seconds / wall seconds; baseline = espeak-ng directly',
          ),
        );
      }
      // Several clients at once: audio delivered per wall second, against as many espeak-ng at once.
      const many = async (fn: () => Promise<Timing>) => {
        let left = N * 2;
        let audio = 0;
        const t0 = performance.now();
        await Promise.all(
          Array.from({ length: CONCURRENCY }, async () => {
            while (left-- > 0) {
              const t = await fn(); // not `audio += await …`: that reads `audio` before the await
              audio += t.audioSeconds;
            }
          }),
        );
        return audio / ((performance.now() - t0) / 1000);
      };
      const directMany = await many(() => espeakDirect(TEXTS.long));
      const httpMany = await many(() => overHttp(stack, key, TEXTS.long));
      rows.push(
        row(
          `/speech aggregate real-time factor, ${CONCURRENCY} clients (long text)`,
          httpMany,
          '× real time',
          directMany,
          `baseline = ${CONCURRENCY} espeak-ng at once; one worker process, concurrency ${CONCURRENCY}`,
        ),
      );
    } finally {
      if (worker && worker.exitCode === null) {
        const exited = new Promise((r) => worker!.once('exit', r));
        worker.kill('SIGTERM');
        await exited;
      }
      await stack.stop();
    }
    return rows;
  },
};
