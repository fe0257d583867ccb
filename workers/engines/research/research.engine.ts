import type { ResearchSource } from '../../../contracts/research';

/** A workspace source that was found and read. */
export interface ReadSource extends ResearchSource {
  /** 1-based citation number. */
  n: number;
  kind: string;
  text: string;
}

export interface ResearchEngineInput {
  query: string;
  sources: ReadSource[];
  /** Sources found but not readable, with the reason. */
  unread: { title: string; reason: string }[];
}

export interface ResearchEngineOutput {
  /** Markdown report. */
  content: string;
  /** Tokens the writer spent (prompt + completion) when the provider reports it; else null. */
  tokensUsed: number | null;
}

export interface ResearchEngine {
  readonly name: string;
  write(
    input: ResearchEngineInput,
    ctx: { signal: AbortSignal; progress(raw: string, msg: string): Promise<void> },
  ): Promise<ResearchEngineOutput>;
}

/**
 * Token count by an approximation of byte-pair tokenizers such as cl100k: the text is split into
 * letter runs, digit runs and single punctuation marks (whitespace is absorbed, as BPE merges a
 * leading space into the next word); a letter run counts one token per started 6 characters
 * (common words are one token, long words two or three), a digit run one per started 3 digits,
 * each punctuation mark one. On English prose this lands within about 15% of cl100k.
 */
export function countTokens(text: string): number {
  let n = 0;
  for (const m of text.matchAll(/[\p{L}\p{M}]+|\p{N}+|[^\s\p{L}\p{M}\p{N}]/gu)) {
    const piece = m[0];
    if (/^\p{N}/u.test(piece)) n += Math.ceil(piece.length / 3);
    else if (/^[\p{L}\p{M}]/u.test(piece)) n += Math.ceil(piece.length / 6);
    else n += 1;
  }
  return n;
}

const STOP = new Set(
  'a an and are as at be but by can do does for from has have how i in is it its me my of on or our so than that the their them then there these they this to was we were what when where which who why will with you your about into over under after before more most some such only also just'.split(
    ' ',
  ),
);

/** Query terms: lower-case words of 3+ characters that are not stop words. */
export function queryTerms(query: string): string[] {
  return [
    ...new Set(
      query
        .toLowerCase()
        .split(/[^\p{L}\p{N}]+/u)
        .filter((w) => w.length > 2 && !STOP.has(w)),
    ),
  ];
}

/** Sentences of a text (prose split on . ! ? and line breaks), trimmed, without empties. */
export function sentences(text: string): string[] {
  return text
    .replace(/<(script|style)[^>]*>[\s\S]*?<\/\1>/gi, ' ')
    .replace(/<[^>]+>/g, ' ')
    .split(/(?<=[.!?])\s+|\n+/)
    .map((s) =>
      s
        .replace(/^\s*(#+|[-*>]|\d+\.)\s+/, '')
        .replace(/\s+/g, ' ')
        .trim(),
    )
    .filter((s) => s.length > 12 && /\p{L}/u.test(s));
}

export const hits = (text: string, terms: string[]) => {
  const t = text.toLowerCase();
  let n = 0;
  for (const term of terms) {
    let i = t.indexOf(term);
    while (i !== -1) {
      n++;
      i = t.indexOf(term, i + term.length);
    }
  }
  return n;
};

/** A sentence's identity for de-duplication: lower case, letters and digits only. */
export const sentenceKey = (s: string) =>
  s
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, ' ')
    .trim();
