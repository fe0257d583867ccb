import { spawn } from 'node:child_process';
import sharp from 'sharp';
import { AppError } from '../../../platform/infra/errors';
import { linesToText, type ExtractedText, type SizedLine, type TextExtractor } from './extract.engine';

/** Most pixels an image may decode to (a 10 MB PNG can claim gigapixels). */
export const OCR_MAX_INPUT_PIXELS = 100_000_000;
/** Longest side handed to tesseract; larger images are scaled down first (time grows with area). */
export const OCR_MAX_SIDE = 5000;
/** tesseract's own time limit, below any sensible EXTRACT_RPC_TIMEOUT_MS; the caller's deadline also stops it. */
export const OCR_TIMEOUT_MS = 120_000;
/** Largest TSV read back from tesseract. */
const MAX_OUTPUT_BYTES = 32 * 1024 * 1024;

export interface OcrOptions {
  /** tesseract `-l` value, e.g. eng or eng+deu (config EXTRACT_OCR_LANGUAGES). */
  languages: string;
  /** The tesseract binary; default `tesseract` on PATH. */
  tesseractPath?: string;
  timeoutMs?: number;
}

type Word = { key: string; text: string; height: number; conf: number };

/** tesseract TSV (level 5 rows are words) to lines with their type size and the mean word confidence. */
export function tsvLines(tsv: string): { lines: SizedLine[]; confidence: number | null } {
  const words: Word[] = [];
  for (const row of tsv.split('\n').slice(1)) {
    const c = row.split('\t');
    if (c[0] !== '5' || c.length < 12) continue;
    const text = c.slice(11).join('\t').trim();
    if (!text) continue;
    words.push({ key: `${c[1]}.${c[2]}.${c[3]}.${c[4]}`, text, height: Number(c[9]) || 0, conf: Number(c[10]) });
  }
  const byLine = new Map<string, Word[]>();
  for (const w of words) byLine.set(w.key, [...(byLine.get(w.key) ?? []), w]);
  const lines: SizedLine[] = [];
  for (const ws of byLine.values()) {
    // A bullet glyph read as a stray character (•, ¢, «, e, …): a one-character first word that
    // is not a letter or digit, or that tesseract doubts, before a capitalised word.
    const [first, second] = ws;
    const bullet =
      first &&
      second &&
      first.text.length === 1 &&
      (!/[\p{L}\p{N}]/u.test(first.text) || first.conf < 60) &&
      /^\p{Lu}/u.test(second.text);
    const text = bullet
      ? `- ${ws
          .slice(1)
          .map((w) => w.text)
          .join(' ')}`
      : ws.map((w) => w.text).join(' ');
    const heights = ws
      .filter((w) => w.text.length > 1 || ws.length === 1)
      .map((w) => w.height)
      .sort((a, b) => a - b);
    lines.push({ text, size: heights[Math.floor(heights.length / 2)] ?? 0 });
  }
  const confs = words.map((w) => w.conf).filter((c) => c >= 0);
  return { lines, confidence: confs.length ? confs.reduce((a, b) => a + b, 0) / confs.length : null };
}

/** Run tesseract on a PNG over stdin/stdout; killed at `timeoutMs` or when `signal` aborts. */
function runTesseract(png: Buffer, opts: Required<OcrOptions>, signal: AbortSignal): Promise<string> {
  return new Promise((resolve, reject) => {
    const timeout = AbortSignal.timeout(opts.timeoutMs);
    const both = AbortSignal.any([signal, timeout]);
    const child = spawn(opts.tesseractPath, ['stdin', 'stdout', '-l', opts.languages, '--psm', '3', 'tsv'], {
      signal: both,
      killSignal: 'SIGKILL',
      stdio: ['pipe', 'pipe', 'pipe'],
      // One thread per OCR: the pool's concurrency is the parallelism (2 OCRs on 2 cores, not 2 x N threads).
      env: { ...process.env, OMP_THREAD_LIMIT: '1' },
    });
    const out: Buffer[] = [];
    let outBytes = 0;
    let err = '';
    let failed = false;
    const fail = (e: Error) => {
      if (failed) return;
      failed = true;
      reject(e);
    };
    child.stdout.on('data', (b: Buffer) => {
      outBytes += b.length;
      if (outBytes > MAX_OUTPUT_BYTES) {
        child.kill('SIGKILL');
        return fail(new AppError('unreadable_document', 'documentBase64: OCR produced more text than we read'));
      }
      out.push(b);
    });
    child.stderr.on('data', (b: Buffer) => {
      if (err.length < 4096) err += b.toString('utf8');
    });
    child.stdin.on('error', () => {}); // tesseract may exit before reading everything; its exit code tells
    child.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOENT')
        return fail(
          new AppError(
            'service_unavailable',
            `OCR is not available on this extract worker: ${opts.tesseractPath} is not installed (Debian package tesseract-ocr)`,
          ),
        );
      if (signal.aborted) return fail(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
      if (timeout.aborted) return fail(new AppError('timeout', `OCR did not finish within ${opts.timeoutMs} ms`));
      fail(e);
    });
    child.on('close', (code) => {
      if (failed) return;
      if (code === 0) return resolve(Buffer.concat(out).toString('utf8'));
      const missing = /Failed loading language '([^']+)'/.exec(err);
      if (missing)
        return fail(
          new AppError(
            'service_unavailable',
            `OCR language data "${missing[1]}" is not installed on this extract worker (Debian package tesseract-ocr-${missing[1]})`,
          ),
        );
      fail(
        new AppError(
          'unreadable_document',
          `documentBase64: OCR failed on the image (tesseract exit ${code}: ${err.trim().split('\n').pop() ?? ''})`,
        ),
      );
    });
    child.stdin.end(png);
  });
}

/**
 * tesseract-ocr-v1: PNG, JPEG and WebP through the tesseract CLI. The image is normalised with
 * sharp first (EXIF rotation, transparency flattened onto white, greyscale, at most 5000 px a
 * side, PNG), so every format reaches tesseract the same way.
 */
export function createOcrExtractor(options: OcrOptions): TextExtractor {
  const opts: Required<OcrOptions> = { tesseractPath: 'tesseract', timeoutMs: OCR_TIMEOUT_MS, ...options };
  return {
    name: 'tesseract-ocr-v1',
    mimeTypes: ['image/png', 'image/jpeg', 'image/webp'],
    async extract(bytes, { signal }): Promise<ExtractedText> {
      let png: Buffer;
      try {
        png = await sharp(bytes, { limitInputPixels: OCR_MAX_INPUT_PIXELS, failOn: 'error' })
          .rotate()
          .flatten({ background: '#ffffff' })
          .resize({ width: OCR_MAX_SIDE, height: OCR_MAX_SIDE, fit: 'inside', withoutEnlargement: true })
          .greyscale()
          .png({ compressionLevel: 1 })
          .toBuffer();
      } catch (err) {
        throw new AppError(
          'unreadable_document',
          `documentBase64: the image could not be decoded (${(err as Error).message})`,
        );
      }
      signal.throwIfAborted();
      const { lines, confidence } = tsvLines(await runTesseract(png, opts, signal));
      const notes: string[] = [];
      if (confidence !== null && confidence < 60)
        notes.push(`OCR confidence was low (${Math.round(confidence)}/100): check the labels against the image.`);
      // Line heights from OCR include ascenders and descenders: ask a little more of a heading than in a PDF.
      return {
        engine: 'tesseract-ocr-v1',
        text: linesToText(lines, 1.35),
        metadataTitle: null,
        pages: 1,
        ocr: true,
        truncated: false,
        notes,
      };
    },
  };
}
