import { createHash } from 'node:crypto';
import { SongRequest, type SongResult } from '../../contracts/songs';
import type { Config } from '../../platform/infra/config';
import type { Runtime } from '../../platform/runtime';
import { createElevenLabsSongEngine } from '../engines/songs/elevenlabs.engine';
import { createLocalSongEngine } from '../engines/songs/local.engine';
import { planSong, type SongEngine } from '../engines/songs/song.engine';
import type { PoolDefinition } from '../pool/pool';

export function songEngineFrom(config: Config): SongEngine {
  return config.SONG_ENGINE === 'elevenlabs'
    ? createElevenLabsSongEngine({
        baseUrl: config.ELEVENLABS_BASE_URL,
        apiKey: config.ELEVENLABS_API_KEY,
        model: config.ELEVENLABS_MUSIC_MODEL,
      })
    : createLocalSongEngine();
}

const slug = (s: string) =>
  s
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '')
    .slice(0, 60) || 'song';

/** The song pool: request → plan (tempo, key, length, lyrics) → audio in the blob store. */
export function songWorker(
  rt: Runtime,
  engine: SongEngine = songEngineFrom(rt.config),
): PoolDefinition<SongRequest, SongResult> {
  return {
    pool: 'song',
    input: SongRequest,
    async process(req, ctx) {
      const plan = planSong(req);
      await ctx.progress(
        'composing',
        `Composing "${plan.title}": ${plan.bars} bars at ${plan.tempoBpm} BPM in ${plan.key}${plan.instrumental ? ', instrumental' : `, ${plan.lines.length} sung lines`}`,
      );
      const out = await engine.render(plan, { signal: ctx.signal, progress: ctx.progress });
      await ctx.progress('storing', 'Saving the audio');
      const filename = `${slug(plan.title)}.${out.format}`;
      const blob = await rt.blobs.put(out.audio, { contentType: out.mimeType, filename, accountId: ctx.job.accountId });
      return {
        title: plan.title,
        engine: engine.name,
        durationSeconds: Math.round(out.durationSeconds * 1000) / 1000,
        format: out.format,
        mimeType: out.mimeType,
        sampleRate: out.sampleRate,
        tempoBpm: plan.tempoBpm,
        key: plan.key,
        instrumental: plan.instrumental,
        lyrics: plan.instrumental ? null : plan.lines.join('\n'),
        audioUrl: rt.blobs.url(blob.id, filename),
        sizeBytes: out.audio.length,
        sha256: createHash('sha256').update(out.audio).digest('hex'),
      };
    },
    eventExtras: (r) => ({ audioUrl: r.audioUrl, durationSeconds: r.durationSeconds }),
  };
}
