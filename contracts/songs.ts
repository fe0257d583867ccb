import { z } from 'zod';
import { line, text } from './common';

export const SONG_TIERS = ['auto', 'premium', 'fast'] as const;

/** SPEC 2.13 song request. */
export const SongRequest = z
  .strictObject({
    style: text(1000)
      .trim()
      .min(1, { error: 'must not be empty' })
      .describe('Genre, mood and instruments, e.g. "upbeat synth pop".'),
    title: line(255).optional().describe('Song title; derived from the style when omitted.'),
    lyrics: text(10_000).optional().describe('Lyrics, one sung line per line. Ignored when instrumental is true.'),
    autoLyrics: z
      .boolean({ error: 'must be a boolean' })
      .optional()
      .describe(
        'Write lyrics from the style when no lyrics are given. Default true; false with no lyrics renders an instrumental.',
      ),
    instrumental: z
      .boolean({ error: 'must be a boolean' })
      .optional()
      .describe('No vocal line; the result has lyrics null. Default false.'),
    tier: z
      .enum(SONG_TIERS, { error: `must be one of ${SONG_TIERS.join(', ')}` })
      .optional()
      .describe('Default auto. fast: a short sketch; premium: a longer arrangement at 44.1 kHz.'),
  })
  .meta({ id: 'SongRequest' });
export type SongRequest = z.infer<typeof SongRequest>;

/** Result of a complete `song` job (SPEC 2.21 leaves it to us). */
export const SongResult = z
  .object({
    title: z.string(),
    engine: z.string().describe('Engine that made the audio, e.g. local-synth-v1.'),
    durationSeconds: z.number(),
    format: z.enum(['wav', 'mp3']),
    mimeType: z.string(),
    sampleRate: z.number().int(),
    tempoBpm: z.number().int(),
    key: z.string().describe('Musical key, e.g. "A minor".'),
    instrumental: z.boolean(),
    lyrics: z.string().nullable().describe('The lyrics sung; null for instrumentals.'),
    audioUrl: z.string().describe('Absolute, signed URL of the audio; supports HTTP Range.'),
    sizeBytes: z.number().int(),
    sha256: z.string(),
  })
  .meta({ id: 'SongResult' });
export type SongResult = z.infer<typeof SongResult>;
