import { XMLParser } from 'fast-xml-parser';
import type JSZip from 'jszip';

/**
 * Reading OOXML packages (PPTX, XLSX: ZIPs of XML parts) with jszip and fast-xml-parser: inflate
 * a part chunk by chunk under a byte cap, parse XML into fast-xml-parser's ordered tree, walk it.
 */

/** fast-xml-parser's preserveOrder tree: `{ tag: children, ':@': attributes }` or `{ '#text': … }`. */
export type XNode = Record<string, unknown>;

/**
 * A parser for OOXML parts: document order kept, attributes without prefix, values left as text
 * (no number guessing, whitespace kept). `removeNSPrefix` drops namespace prefixes from tags and
 * attributes (`x:row` → `row`, `r:id` → `id`), for readers that meet writers using prefixes.
 */
export const ooxmlParser = (opts: { removeNSPrefix?: boolean } = {}) =>
  new XMLParser({
    preserveOrder: true,
    ignoreAttributes: false,
    attributeNamePrefix: '',
    parseTagValue: false,
    parseAttributeValue: false,
    trimValues: false,
    processEntities: true,
    htmlEntities: true,
    removeNSPrefix: opts.removeNSPrefix ?? false,
  });

export const tagOf = (n: XNode) => Object.keys(n).find((k) => k !== ':@') ?? '';
export const kids = (n: XNode): XNode[] => {
  const v = n[tagOf(n)];
  return Array.isArray(v) ? (v as XNode[]) : [];
};
export const attrs = (n: XNode) => (n[':@'] ?? {}) as Record<string, string>;
export const child = (n: XNode, tag: string) => kids(n).find((k) => tagOf(k) === tag);
export const path = (n: XNode | undefined, ...tags: string[]) =>
  tags.reduce<XNode | undefined>((at, t) => (at ? child(at, t) : undefined), n);
/** Every descendant with `tag`, in document order, not looking inside a match. */
export const findAll = (n: XNode, tag: string, out: XNode[] = []): XNode[] => {
  for (const k of kids(n)) {
    if (tagOf(k) === tag) out.push(k);
    else findAll(k, tag, out);
  }
  return out;
};
/** The text directly inside an element (its text nodes joined). */
export const ownText = (n: XNode) =>
  kids(n)
    .map((x) => String(x['#text'] ?? ''))
    .join('');

/** A part's bytes could not be inflated (a damaged ZIP entry). */
export class PartInflateError extends Error {
  override name = 'PartInflateError';
  constructor(
    readonly part: string,
    cause: Error,
  ) {
    super(`${part} cannot be inflated (${cause.message})`, { cause });
  }
}

/** JSZip's chunked reader of one entry (public API, absent from its typings). */
interface PartStream {
  on(event: 'data', cb: (chunk: Uint8Array) => void): PartStream;
  on(event: 'error', cb: (err: Error) => void): PartStream;
  on(event: 'end', cb: () => void): PartStream;
  pause(): PartStream;
  resume(): PartStream;
}

/**
 * Inflate one part chunk by chunk, handing each to `onChunk` and keeping nothing. `onChunk` may
 * throw (the read stops with that error) or return false (the read stops, nothing more is
 * inflated). Stops with the signal's reason once it aborts; rejects with PartInflateError on
 * damaged data. Resolves with the bytes inflated.
 */
export function streamPart(
  file: JSZip.JSZipObject,
  signal: AbortSignal,
  // biome-ignore lint/suspicious/noConfusingVoidType: a callback may return nothing (go on) or false (stop).
  onChunk: (chunk: Uint8Array) => void | boolean,
): Promise<number> {
  signal.throwIfAborted();
  return new Promise((resolve, reject) => {
    let size = 0;
    let done = false;
    const stream = (file as unknown as { internalStream(type: 'uint8array'): PartStream }).internalStream('uint8array');
    const finish = (err?: Error) => {
      if (done) return;
      done = true;
      stream.pause();
      if (err) reject(err);
      else resolve(size);
    };
    stream
      .on('data', (chunk) => {
        if (done) return;
        if (signal.aborted) return finish(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
        size += chunk.length;
        try {
          if (onChunk(chunk) === false) finish();
        } catch (err) {
          finish(err as Error);
        }
      })
      .on('error', (err) => finish(new PartInflateError(file.name, err)))
      .on('end', () => finish())
      .resume();
  });
}

/** Inflate one part whole as UTF-8 text, stopping with `tooLarge()` past `max` bytes however large the entry says it is. */
export async function readPart(
  file: JSZip.JSZipObject,
  max: number,
  signal: AbortSignal,
  tooLarge: () => Error,
): Promise<string> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  await streamPart(file, signal, (chunk) => {
    size += chunk.length;
    if (size > max) throw tooLarge();
    chunks.push(chunk);
  });
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * Every `<tag …>…</tag>` or `<tag …/>` element of a part (any namespace prefix), in document
 * order, as its XML text, read as the part inflates: only the element being read is held, and
 * nothing more is inflated once `onElement` returns false. For large parts made of many small
 * elements (a worksheet's rows, a shared-string table), where parsing the whole part at once
 * would hold it and its whole tree in memory. Elements of that name must not nest.
 */
export async function streamElements(
  file: JSZip.JSZipObject,
  tag: string,
  signal: AbortSignal,
  // biome-ignore lint/suspicious/noConfusingVoidType: a callback may return nothing (go on) or false (stop).
  onElement: (xml: string) => void | boolean,
): Promise<void> {
  const open = new RegExp(`<(?:[A-Za-z_][\\w.-]*:)?${tag}(?=[\\s/>])`, 'g');
  const decoder = new TextDecoder('utf-8');
  let buf = '';
  // How far the buffer's first (incomplete) element was searched for its end tag: a long element
  // arriving in many chunks is scanned once, not once per chunk.
  let scanned = 0;
  /** Hand over the complete elements in `buf`, keep the rest; false once `onElement` stops. */
  const drain = (): boolean => {
    let from = 0;
    for (;;) {
      open.lastIndex = from;
      const m = open.exec(buf);
      if (!m) {
        // Nothing starts here: keep only a tail that may be the beginning of the next start tag.
        const lt = buf.lastIndexOf('<');
        buf = lt >= from && buf.length - lt <= tag.length + 64 ? buf.slice(lt) : '';
        scanned = 0;
        return true;
      }
      const startEnd = buf.indexOf('>', m.index);
      let end = -1;
      if (startEnd >= 0 && buf[startEnd - 1] === '/') end = startEnd + 1;
      else if (startEnd >= 0) {
        const close = `</${m[0].slice(1)}>`;
        const at = buf.indexOf(close, Math.max(startEnd, m.index + scanned - close.length));
        if (at >= 0) end = at + close.length;
      }
      if (end < 0) {
        buf = buf.slice(m.index);
        scanned = buf.length;
        return true;
      }
      scanned = 0;
      if (onElement(buf.slice(m.index, end)) === false) return false;
      from = end;
    }
  };
  let stopped = false;
  await streamPart(file, signal, (chunk) => {
    buf += decoder.decode(chunk, { stream: true });
    stopped = !drain();
    return !stopped;
  });
  if (!stopped) {
    buf += decoder.decode();
    drain();
  }
}
