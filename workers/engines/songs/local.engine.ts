import { encodeWav, floatToPcm16 } from '../../../platform/media/wav';
import type { SongEngine, SongPlan } from './song.engine';

/**
 * local-synth-v1: an offline, deterministic synthesiser in plain TypeScript. It renders the plan
 * as 16-bit mono PCM WAV: a pad playing the chord of each bar, a bass on beats 1 and 3, a drum
 * pattern (sine-sweep kick, noise snare and hats from a seeded generator), and a lead line. With
 * lyrics the lead is a "vocal": one note per syllable, a formant-shaped harmonic tone whose vowel
 * follows the syllable, with vibrato. Instrumentals get a plucked square lead instead.
 * Same plan → same samples → same bytes.
 */
const SCALES = { major: [0, 2, 4, 5, 7, 9, 11], minor: [0, 2, 3, 5, 7, 8, 10] } as const;

/** Rough vowel formants (F1, F2) in Hz. */
const FORMANTS: Record<string, [number, number]> = {
  a: [800, 1200],
  e: [500, 1900],
  i: [300, 2300],
  o: [500, 900],
  u: [350, 800],
  y: [300, 2100],
};

export function mulberry32(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const midiHz = (m: number) => 440 * 2 ** ((m - 69) / 12);

/** Syllables of a line, each as the vowel that colours it. */
export function syllables(line: string): string[] {
  const out: string[] = [];
  for (const word of line
    .toLowerCase()
    .split(/[^a-z']+/)
    .filter(Boolean)) {
    const groups = word.match(/[aeiouy]+/g) ?? ['a'];
    // A silent final e does not make a syllable ("fade", "stay" stays one).
    if (groups.length > 1 && /[^aeiouy]e$/.test(word)) groups.pop();
    for (const g of groups) out.push(g[0]!);
  }
  return out;
}

const TAU = Math.PI * 2;

type AddVoice = (
  startSec: number,
  durSec: number,
  amp: number,
  voice: (t: number, i: number) => number,
  attack?: number,
  release?: number,
) => void;

/** Drums of one bar: kicks (four on the floor for dance styles), snares unless soft, eighth-note hats. */
function drums(
  add: AddVoice,
  noise: () => number,
  barStart: number,
  spb: number,
  opts: { soft: boolean; fourOnFloor: boolean },
) {
  const { soft, fourOnFloor } = opts;
  const kicks = fourOnFloor ? [0, 1, 2, 3] : [0, 2];
  for (const beat of kicks)
    add(
      barStart + beat * spb,
      0.25,
      soft ? 0.35 : 0.55,
      (t) => Math.sin(TAU * (50 + 100 * Math.exp(-t * 30)) * t) * Math.exp(-t * 12),
      0.001,
      0.05,
    );
  if (!soft) for (const beat of [1, 3]) add(barStart + beat * spb, 0.18, 0.22, () => noise() * 2 - 1, 0.001, 0.12);
  for (let e = 0; e < 8; e++) {
    let prev = 0;
    add(
      barStart + (e * spb) / 2,
      0.05,
      soft ? 0.04 : 0.07,
      () => {
        const x = noise() * 2 - 1;
        const hp = x - prev; // crude high-pass: hats, not hiss
        prev = x;
        return hp;
      },
      0.001,
      0.03,
    );
  }
}

/** Master: soft clip, then fade in and out. */
function master(mix: Float32Array, sr: number) {
  const total = mix.length;
  const fadeIn = Math.min(total, Math.floor(0.05 * sr));
  const fadeOut = Math.min(total, Math.floor(0.6 * sr));
  for (let i = 0; i < total; i++) {
    let v = Math.tanh(mix[i]! * 1.2) * 0.9;
    if (i < fadeIn) v *= i / fadeIn;
    if (i >= total - fadeOut) v *= (total - i) / fadeOut;
    mix[i] = v;
  }
}

/** Renders bar by bar, yielding the bar index after each; returns the mastered samples. */
export function* synthesizeBars(plan: SongPlan): Generator<number, Float32Array, void> {
  const sr = plan.sampleRate;
  const total = Math.round(plan.durationSeconds * sr);
  const mix = new Float32Array(total);
  const rnd = mulberry32(plan.seed);
  const noise = mulberry32(plan.seed ^ 0x9e3779b9);
  const spb = 60 / plan.tempoBpm; // seconds per beat
  const scale = SCALES[plan.mode];
  const base = 48 + plan.tonic; // C3..B3
  const degree = (d: number) => Math.floor(d / 7) * 12 + scale[((d % 7) + 7) % 7]!;
  const style = plan.style.toLowerCase();
  const soft = /\b(ballad|ambient|lo-?fi|chill|lullaby|calm|gentle)\b/.test(style);
  const fourOnFloor = /\b(house|techno|disco|dance|edm|trance|electro)\b/.test(style);

  const add = (
    startSec: number,
    durSec: number,
    amp: number,
    voice: (t: number, i: number) => number,
    attack = 0.01,
    release = 0.08,
  ) => {
    const s0 = Math.max(0, Math.floor(startSec * sr));
    const n = Math.min(total - s0, Math.floor(durSec * sr));
    for (let i = 0; i < n; i++) {
      const t = i / sr;
      const env = Math.min(1, t / attack) * Math.min(1, (durSec - t) / release);
      mix[s0 + i]! += amp * Math.max(0, env) * voice(t, i);
    }
  };

  const sung = plan.lines.map(syllables);
  let leadDeg = 7; // one octave above the tonic, in scale degrees

  for (let bar = 0; bar < plan.bars; bar++) {
    const barStart = bar * 4 * spb;
    const chordDeg = plan.progression[bar % plan.progression.length]!;
    const chord = [chordDeg, chordDeg + 2, chordDeg + 4].map((d) => base + degree(d));

    // Pad: the triad across the bar, three soft harmonics each.
    for (const m of chord) {
      const f = midiHz(m);
      add(
        barStart,
        4 * spb,
        soft ? 0.07 : 0.05,
        (t) => Math.sin(TAU * f * t) + 0.3 * Math.sin(TAU * 2 * f * t) + 0.12 * Math.sin(TAU * 3 * f * t),
        0.15,
        0.3,
      );
    }
    // Bass: chord root two octaves down, beats 1 and 3.
    const bassF = midiHz(chord[0]! - 12);
    for (const beat of [0, 2])
      add(
        barStart + beat * spb,
        spb * 1.8,
        0.22,
        (t) => Math.sin(TAU * bassF * t) + 0.25 * Math.sin(TAU * 2 * bassF * t),
        0.005,
        0.1,
      );

    // Drums (not in the intro's first bar, to open softly).
    if (bar > 0 || plan.bars <= 4) drums(add, noise, barStart, spb, { soft, fourOnFloor });

    // Lead.
    const lineIdx = Math.floor((bar - plan.introBars) / 2);
    const sylls = !plan.instrumental && lineIdx >= 0 && lineIdx < sung.length ? sung[lineIdx]! : null;
    if (sylls) {
      // A line spans two bars: syllables on eighths (or sixteenths when the line is long).
      const half = (bar - plan.introBars) % 2;
      const slots = sylls.length > 16 ? 32 : 16;
      const step = (8 * spb) / slots;
      const perBar = slots / 2;
      for (let k = 0; k < perBar; k++) {
        const idx = half * perBar + k;
        if (idx >= sylls.length) break;
        const strong = k % (perBar / 4) === 0;
        const move = Math.floor(rnd() * 5) - 2;
        leadDeg = Math.max(4, Math.min(12, leadDeg + move));
        if (strong) {
          // Land on the nearest chord tone on the beat.
          const tones = [chordDeg, chordDeg + 2, chordDeg + 4, chordDeg + 7, chordDeg + 9].filter(
            (d) => d >= 4 && d <= 12,
          );
          leadDeg = tones.reduce(
            (a, b) => (Math.abs(b - leadDeg) < Math.abs(a - leadDeg) ? b : a),
            tones[0] ?? leadDeg,
          );
        }
        const f0 = midiHz(base + 12 + degree(leadDeg - 7));
        const [f1, f2] = FORMANTS[sylls[idx]!] ?? FORMANTS.a!;
        const weights: number[] = [];
        for (let h = 1; h <= 10; h++) {
          const hf = h * f0;
          weights.push(Math.exp(-(((hf - f1) / 130) ** 2)) + 0.6 * Math.exp(-(((hf - f2) / 180) ** 2)) + 0.08 / h);
        }
        let phase = 0;
        add(
          barStart + k * step,
          step * 0.95,
          0.08,
          (t) => {
            const vib = t > 0.12 ? 1 + 0.006 * Math.sin(TAU * 5.5 * t) : 1;
            phase += (TAU * f0 * vib) / sr;
            let v = 0;
            for (let h = 0; h < weights.length; h++) v += weights[h]! * Math.sin((h + 1) * phase);
            return v;
          },
          0.03,
          0.05,
        );
      }
    } else if (plan.instrumental && bar >= 1 && bar < plan.bars - 1) {
      for (let e = 0; e < 8; e++) {
        if (rnd() < 0.3) continue; // rests
        leadDeg = Math.max(4, Math.min(12, leadDeg + Math.floor(rnd() * 5) - 2));
        const f = midiHz(base + 12 + degree(leadDeg - 7));
        add(
          barStart + (e * spb) / 2,
          spb / 2,
          0.07,
          (t) =>
            (Math.sin(TAU * f * t) + Math.sin(TAU * 3 * f * t) / 3 + Math.sin(TAU * 5 * f * t) / 5) * Math.exp(-t * 6),
          0.004,
          0.04,
        );
      }
    }
    yield bar;
  }

  master(mix, sr);
  return mix;
}

export function createLocalSongEngine(): SongEngine {
  return {
    name: 'local-synth-v1',
    async render(plan, ctx) {
      await ctx.progress('arranging', `Arranging ${plan.bars} bars at ${plan.tempoBpm} BPM in ${plan.key}`);
      const sections = Math.max(1, Math.ceil(plan.bars / 8));
      const gen = synthesizeBars(plan);
      let step = gen.next();
      while (!step.done) {
        const bar = step.value;
        if ((bar + 1) % 8 === 0 || bar === plan.bars - 1) {
          const section = Math.ceil((bar + 1) / 8);
          await ctx.progress(
            'rendering',
            `Rendered section ${section} of ${sections} (bars ${bar - (bar % 8) + 1}-${bar + 1} of ${plan.bars})`,
          );
          if (ctx.signal.aborted) throw ctx.signal.reason;
        }
        // Yield to the event loop between bars so lease renewals and other jobs keep running.
        await new Promise<void>((r) => setImmediate(r));
        step = gen.next();
      }
      const samples = step.value;
      if (ctx.signal.aborted) throw ctx.signal.reason;
      await ctx.progress('encoding', 'Encoding 16-bit PCM WAV');
      const audio = encodeWav(floatToPcm16(samples), plan.sampleRate, 1);
      return {
        audio,
        format: 'wav',
        mimeType: 'audio/wav',
        sampleRate: plan.sampleRate,
        durationSeconds: samples.length / plan.sampleRate,
      };
    },
  };
}
