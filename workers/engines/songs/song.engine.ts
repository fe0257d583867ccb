import { createHash } from 'node:crypto';
import type { SongRequest } from '../../../contracts/songs';

/**
 * The musical plan of a song, derived deterministically from the request so that every engine
 * renders the same tempo, key, length and lyrics:
 * - tempo: an explicit "NNN bpm" in the style wins; else the genre words pick a range (ballad,
 *   lo-fi 60–84; hip hop 80–98; pop, rock 100–128; house, techno 118–130; punk 150–180; …),
 *   mood words (fast, upbeat / slow, sleepy) shift it, and the request hash picks inside it;
 * - key: an explicit "in D minor" wins; else the tonic comes from the hash and the mode from mood
 *   words (sad, dark, moody → minor; happy, bright, sunny → major; else the hash);
 * - length: 4/4 bars. A sung song has a 2-bar intro, 2 bars per lyric line and a 2-bar outro;
 *   the tier caps the lines (fast 4, auto 16, premium 20). Instrumentals are 8 / 16 / 24 bars.
 *   durationSeconds = bars × 4 × 60 / tempo, exactly.
 * - lyrics: given lyrics (blank lines dropped), or, when none are given and autoLyrics is not
 *   false, lines written from the style words; none for instrumentals (or autoLyrics false and no
 *   lyrics, which renders an instrumental).
 */
export interface SongPlan {
  title: string;
  style: string;
  tier: 'auto' | 'premium' | 'fast';
  instrumental: boolean;
  /** Sung lines, in order; empty for instrumentals. */
  lines: string[];
  tempoBpm: number;
  tonic: number; // pitch class, 0 = C
  mode: 'major' | 'minor';
  key: string;
  bars: number;
  introBars: number;
  durationSeconds: number;
  sampleRate: number;
  /** Seed for every random choice of the arrangement (32-bit). */
  seed: number;
  /** Progression as scale degrees (0-based), one chord per bar. */
  progression: number[];
}

export interface SongAudio {
  audio: Buffer;
  format: 'wav' | 'mp3';
  mimeType: string;
  sampleRate: number;
  durationSeconds: number;
}

export interface SongEngine {
  /** Public engine name reported in the result. */
  readonly name: string;
  render(
    plan: SongPlan,
    ctx: { signal: AbortSignal; progress(raw: string, msg: string): Promise<void> },
  ): Promise<SongAudio>;
}

export const NOTE_NAMES = ['C', 'C#', 'D', 'Eb', 'E', 'F', 'F#', 'G', 'Ab', 'A', 'Bb', 'B'] as const;
const PITCH: Record<string, number> = {
  c: 0,
  'c#': 1,
  db: 1,
  d: 2,
  'd#': 3,
  eb: 3,
  e: 4,
  f: 5,
  'f#': 6,
  gb: 6,
  g: 7,
  'g#': 8,
  ab: 8,
  a: 9,
  'a#': 10,
  bb: 10,
  b: 11,
};

const TEMPO_RULES: [RegExp, number, number][] = [
  [/\b(drum and bass|dnb|jungle|breakcore)\b/, 160, 176],
  [/\b(punk|metal|thrash|hardcore)\b/, 150, 180],
  [/\b(techno|trance|edm|house|dance|disco|electro)\b/, 118, 130],
  [/\b(hip ?hop|rap|trap|r&b|rnb|reggae)\b/, 80, 98],
  [/\b(ballad|ambient|lo-?fi|chill|slow|lullaby|soul|blues)\b/, 60, 84],
  [/\b(jazz|swing|bossa)\b/, 96, 140],
  [/\b(rock|indie|pop|funk|country|folk)\b/, 100, 128],
];

const MAJOR_PROGRESSIONS = [
  [0, 4, 5, 3], // I V vi IV
  [5, 3, 0, 4], // vi IV I V
  [0, 3, 4, 3], // I IV V IV
  [0, 5, 3, 4], // I vi IV V
];
const MINOR_PROGRESSIONS = [
  [0, 5, 2, 6], // i VI III VII
  [0, 3, 4, 0], // i iv v i
  [0, 6, 5, 6], // i VII VI VII
  [0, 3, 6, 2], // i iv VII III
];

const STOP = new Set([
  'a',
  'an',
  'the',
  'and',
  'or',
  'with',
  'of',
  'in',
  'on',
  'for',
  'to',
  'song',
  'music',
  'track',
  'bpm',
  'style',
  'about',
  'some',
  'very',
  'major',
  'minor',
]);

const LYRIC_TEMPLATES = [
  'We ride the {w} through the night',
  'Every {w} heart is burning bright',
  'Hold on to the {w} sound',
  'Feet that never touch the ground',
  'Sing it loud the {w} way',
  'Here we are and here we stay',
  'Under {w} skies we find our names',
  'Nothing here will stay the same',
  'Call me when the {w} lights fade',
  'Every promise that we made',
  'Turn it up and let it go',
  'Only {w} hearts will ever know',
];

export const styleWords = (style: string) =>
  style
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s-]/gu, ' ')
    .split(/\s+/)
    .filter((w) => w.length > 2 && !STOP.has(w) && !/^\d+$/.test(w));

/** Deterministic lyrics from the style words. */
export function writeLyrics(style: string, lines: number, seed: number): string[] {
  const words = styleWords(style);
  const pool = words.length ? words : ['golden'];
  const out: string[] = [];
  for (let i = 0; i < lines; i++) {
    const t = LYRIC_TEMPLATES[(i + seed) % LYRIC_TEMPLATES.length]!;
    out.push(t.replace('{w}', pool[i % pool.length]!));
  }
  return out;
}

const titleCase = (s: string) =>
  s
    .split(/\s+/)
    .filter(Boolean)
    .slice(0, 5)
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join(' ');

export function planSong(req: SongRequest): SongPlan {
  const tier = req.tier ?? 'auto';
  const style = req.style.trim();
  const s = style.toLowerCase();
  const given = (req.lyrics ?? '')
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter(Boolean);
  const hash = createHash('sha256')
    .update(JSON.stringify([style, req.title ?? null, given, req.autoLyrics ?? null, req.instrumental ?? false, tier]))
    .digest();
  const seed = hash.readUInt32BE(0);

  // Tempo.
  let tempo: number;
  const explicitBpm = /\b(\d{2,3})\s*bpm\b/.exec(s);
  if (explicitBpm) tempo = Number(explicitBpm[1]);
  else {
    const rule = TEMPO_RULES.find(([re]) => re.test(s));
    const [lo, hi] = rule ? [rule[1], rule[2]] : [90, 126];
    tempo = lo + (hash[4]! % (hi - lo + 1));
    if (/\b(fast|upbeat|energetic|driving|frantic)\b/.test(s)) tempo += 12;
    if (/\b(slow|sleepy|lazy|calm|gentle)\b/.test(s)) tempo -= 10;
  }
  tempo = Math.max(50, Math.min(190, Math.round(tempo)));

  // Key.
  let tonic = hash[5]! % 12;
  let mode: 'major' | 'minor';
  const explicitKey = /\b(?:in\s+)?([a-g](?:#|b)?)\s+(major|minor)\b/.exec(s);
  if (explicitKey && PITCH[explicitKey[1]!] !== undefined) {
    tonic = PITCH[explicitKey[1]!]!;
    mode = explicitKey[2] as 'major' | 'minor';
  } else if (/\b(sad|dark|moody|melancholic|melancholy|minor|haunting|gloomy|blues|somber)\b/.test(s)) mode = 'minor';
  else if (/\b(happy|bright|sunny|cheerful|joyful|uplifting|major)\b/.test(s)) mode = 'major';
  else mode = hash[6]! % 2 ? 'minor' : 'major';

  // Lyrics and length.
  let instrumental = req.instrumental === true;
  let lines: string[] = [];
  const maxLines = tier === 'fast' ? 4 : tier === 'premium' ? 20 : 16;
  if (!instrumental) {
    if (given.length) lines = given;
    else if (req.autoLyrics !== false) lines = writeLyrics(style, tier === 'fast' ? 4 : 8, seed);
    else instrumental = true;
  }
  lines = lines.slice(0, maxLines);
  const introBars = 2;
  const bars = instrumental ? (tier === 'fast' ? 8 : tier === 'premium' ? 24 : 16) : introBars + lines.length * 2 + 2;

  const progressions = mode === 'major' ? MAJOR_PROGRESSIONS : MINOR_PROGRESSIONS;
  return {
    title: req.title?.trim() || titleCase(style) || 'Untitled Song',
    style,
    tier,
    instrumental,
    lines: instrumental ? [] : lines,
    tempoBpm: tempo,
    tonic,
    mode,
    key: `${NOTE_NAMES[tonic]} ${mode}`,
    bars,
    introBars,
    durationSeconds: (bars * 4 * 60) / tempo,
    sampleRate: tier === 'premium' ? 44_100 : 22_050,
    seed,
    progression: progressions[hash[7]! % progressions.length]!,
  };
}
