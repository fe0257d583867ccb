import { z } from 'zod';
import { listEnvelope } from './common';

/**
 * SPEC 4.8: POST /speech and GET /speech/voices. The audio is raw PCM, signed 16-bit
 * little-endian, mono, 24 kHz, streamed by the speech pool over RabbitMQ as it is produced.
 */

/** The audio format of every POST /speech answer. WARNING: public contract. */
export const SPEECH_AUDIO = { sampleRate: 24_000, channels: 1, encoding: 's16le', bytesPerSample: 2 } as const;
/** Content-Type of POST /speech (RFC 2586 audio/L16 names big-endian samples; X-Audio-Encoding says these are little-endian). */
export const SPEECH_MEDIA_TYPE = `audio/L16; rate=${SPEECH_AUDIO.sampleRate}; channels=${SPEECH_AUDIO.channels}`;

/** Most characters (Unicode code points) one POST /speech may speak. */
export const SPEECH_TEXT_MAX_CHARS = 300;
/** The voice name that means "the catalogue's default". */
export const DEFAULT_VOICE = 'default';

/** Words that end with a full stop without ending a sentence ("Dr. Smith"). Compared lower-case. */
const ABBREVIATIONS = new Set([
  'mr',
  'mrs',
  'ms',
  'dr',
  'prof',
  'st',
  'sr',
  'jr',
  'vs',
  'etc',
  'e.g',
  'i.e',
  'no',
  'mt',
  'approx',
  'a.m',
  'p.m',
  'inc',
  'ltd',
  'co',
  'fig',
  'cf',
  'ca',
]);

/**
 * Where a second sentence starts, or -1. A sentence ends at `.`, `!`, `?` or `…` (runs of them,
 * then closing quotes or brackets) followed by white space and a letter or digit, or at a CJK
 * full stop (`。！？`) followed by more text. A full stop after a listed abbreviation or a single
 * letter (an initial: "J. R. R. Tolkien") does not end a sentence.
 */
export function secondSentenceAt(text: string): number {
  const t = text.trim();
  const re = /([.!?…]+)["'”’»)\]]*\s+(?=[\p{L}\p{N}])|[。！？]+(?=\S)/gu;
  for (let m = re.exec(t); m; m = re.exec(t)) {
    if (m[1] === '.') {
      const word = /([\p{L}.]+)$/u.exec(t.slice(0, m.index))?.[1]?.toLowerCase() ?? '';
      if (word.length === 1 || ABBREVIATIONS.has(word)) continue;
    }
    return m.index + m[0].length;
  }
  return -1;
}

const SENTENCE_RULE = `one sentence or short line per call: at most ${SPEECH_TEXT_MAX_CHARS} characters, one line, nothing after the sentence's final "." "!" or "?"; split longer text and send one sentence per call`;

/** SPEC 4.8 body of POST /speech. */
export const SpeechRequest = z
  .strictObject({
    text: z
      .string({ error: 'must be a string' })
      .superRefine((s, ctx) => {
        const t = s.trim();
        let problem: string | undefined;
        if (!t) problem = 'must not be empty';
        else if ([...t].length > SPEECH_TEXT_MAX_CHARS)
          problem = `is ${[...t].length} characters long; ${SENTENCE_RULE}`;
        else if (/[\r\n\u2028\u2029]/.test(t)) problem = `holds a line break; ${SENTENCE_RULE}`;
        else if (secondSentenceAt(t) >= 0) problem = `holds more than one sentence; ${SENTENCE_RULE}`;
        // eslint-disable-next-line no-control-regex
        else if (/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(t))
          problem = 'must not contain control characters';
        if (problem) ctx.addIssue({ code: 'custom', message: problem, input: s });
      })
      // Part of the rule above as JSON Schema: not blank, no line break once trimmed.
      .meta({ minLength: 1, pattern: '^\\s*\\S(?:[^\\r\\n\\u2028\\u2029]*\\S)?\\s*$' })
      .describe(
        `What to say: one sentence or short line (at most ${SPEECH_TEXT_MAX_CHARS} characters, no line break, no second sentence after ".", "!", "?" or "…" followed by more text; abbreviations such as "Dr." and initials do not end a sentence). Longer text: 400 validation_error; send one sentence per call. Charged per character (Unicode code point) of the trimmed text.`,
      ),
    voice: z
      .string({ error: 'must be a string' })
      .max(64, { error: 'must be at most 64 characters' })
      .optional()
      .describe(
        'A voice name from GET /speech/voices; omit or send "default" for the default voice. An unknown name is 400 naming voice.',
      ),
  })
  .meta({ id: 'SpeechRequest' });
export type SpeechRequest = z.infer<typeof SpeechRequest>;

/** SPEC 4.8 one voice of GET /speech/voices. */
export const Voice = z
  .object({
    name: z.string().describe('What POST /speech takes as `voice`.'),
    language: z
      .string()
      .describe(
        'BCP 47 language tag the voice speaks (e.g. en-US); "mul" for a multilingual voice that follows the text.',
      ),
    gender: z.enum(['female', 'male']).nullable().describe('Where the engine states it; null when unknown.'),
    engine: z
      .string()
      .describe(
        'The synthesiser that speaks it (X-Speech-Engine of POST /speech): espeak-ng-local or openai-compatible:<model>.',
      ),
    default: z.boolean().describe('The voice used when `voice` is omitted or "default"; exactly one is.'),
    description: z.string().describe('What it sounds like.'),
  })
  .meta({ id: 'Voice' });
export type Voice = z.infer<typeof Voice>;

export const VoiceList = listEnvelope(Voice).meta({ id: 'VoiceList' });
export type VoiceList = z.infer<typeof VoiceList>;

/** What the API asks the speech pool (not public). */
export const SpeechRpcRequest = z.object({
  text: z.string().min(1),
  /** Catalogue name, already resolved (never "default"). */
  voice: z.string().min(1),
});
export type SpeechRpcRequest = z.infer<typeof SpeechRpcRequest>;

/** The speech pool's final reply after the PCM chunks (not public). */
export interface SpeechRpcReply {
  engine: string;
  voice: string;
  bytes: number;
  chunks: number;
  /** Audio length: bytes / 2 / 24000. */
  audioSeconds: number;
  synthMs: number;
}
