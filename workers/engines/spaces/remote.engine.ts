import { setTimeout as sleep } from 'node:timers/promises';
import { createGunzip } from 'node:zlib';
import { z } from 'zod';
import type { SpaceResult } from '../../../contracts/spaces';
import { AppError } from '../../../platform/infra/errors';
import { guardedFetch, readLimited } from '../../../platform/infra/ssrf';
import { RetryLaterError, UnrecoverableError } from '../../pool/errors';
import type { SpaceEngine, SpaceEngineContext, SpaceEngineInput } from './space.engine';
import { SPZ_MAGIC } from './spz';

export const REMOTE_ENGINE_NAME = 'remote-world-v1';

/**
 * Adapter for a hosted world-generation provider (SPACE_ROOM_ENGINE=remote). The minimal HTTP
 * contract it speaks (JSON; every call carries `Authorization: Bearer SPACE_PROVIDER_API_KEY`):
 *
 *   POST {base}/v1/worlds
 *     { "source": "photo" | "photos" | "video", "imageUrls": [..] | "videoUrl": ".." | "imageUrl": "..",
 *       "quality": "preview" | "full", "title": string | null }
 *     → 200/201/202 { "id": string }
 *     (the provider fetches the input URLs itself; 4xx = refused, the job fails; 5xx = retried)
 *   GET {base}/v1/worlds/{id}
 *     → { "id", "status": "queued" | "running" | "succeeded" | "failed", "error"?: string,
 *         "quick"?: { "splatUrl": url, "gaussians": int },
 *         "full"?: { "splatUrl": url, "gaussians": int, "metricScale": number,
 *                    "floorOffsetM"?: number | null, "colliderUrl"?: url | null, "panoramaUrl"?: url | null } }
 *     `quick` may appear while running: it is published as the stage-preview result.
 *
 * The create call carries `Idempotency-Key: <our job id>`, and the world id it answers is kept on
 * the job (ctx.remember), so a retried job polls the world it already paid for instead of creating
 * another. Polled every SPACE_PROVIDER_POLL_MS up to SPACE_PROVIDER_TIMEOUT_MS after the world was
 * created; a poll that cannot reach the provider or gets a 5xx is retried within that time with
 * growing waits (the job is not rerun). The provider itself is operator configuration, so it is
 * called directly; every asset URL it answers is downloaded through the SSRF guard (at most
 * SPACE_PROVIDER_MAX_BYTES each), checked (a splat must be an SPZ file, `gaussians` being its
 * header's point count, not the provider's claim; a collider must be GLB 2.0; a panorama PNG or
 * JPEG), and re-stored in our blob store, so the result's URLs are ours and signed. The key is
 * only ever put in the Authorization header: no message quotes it and nothing logs it.
 */
export interface RemoteEngineOptions {
  baseUrl: string | undefined;
  apiKey: string | undefined;
  pollMs: number;
  timeoutMs: number;
  maxBytes: number;
  allowLoopback: boolean;
}

const Asset = z.string().url();
const WorldStatus = z.object({
  id: z.string().optional(),
  status: z.enum(['queued', 'running', 'succeeded', 'failed']),
  error: z.string().optional(),
  quick: z.object({ splatUrl: Asset, gaussians: z.number().int().nonnegative() }).optional(),
  full: z
    .object({
      splatUrl: Asset,
      gaussians: z.number().int().nonnegative(),
      metricScale: z.number().positive(),
      floorOffsetM: z.number().nullable().optional(),
      colliderUrl: Asset.nullable().optional(),
      panoramaUrl: Asset.nullable().optional(),
    })
    .optional(),
});
type WorldStatus = z.infer<typeof WorldStatus>;

const clip = (s: string) => s.replace(/\s+/g, ' ').slice(0, 200);
/** 'glTF' read as a little-endian uint32: the first word of a GLB file. */
const GLB_MAGIC = 0x46546c67;
/** Longest wait between polls while the provider cannot be reached. */
const MAX_BACKOFF_MS = 60_000;
/** Keys the adapter keeps on the job between attempts (SpaceEngineContext.remember). */
const RESUME = { world: 'providerWorldId', createdAt: 'providerWorldCreatedAt' } as const;

/**
 * The first `n` bytes of a gzip stream, inflating no more than needed: a splat may be hundreds of
 * MB uncompressed and only its 16-byte header is read here. Shorter when the stream is shorter.
 */
function gunzipHead(gz: Buffer, n: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const inflate = createGunzip();
    const chunks: Buffer[] = [];
    let have = 0;
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      inflate.destroy();
      fn();
    };
    inflate.on('data', (c: Buffer) => {
      chunks.push(c);
      have += c.length;
      if (have >= n) settle(() => resolve(Buffer.concat(chunks).subarray(0, n)));
    });
    inflate.on('end', () => settle(() => resolve(Buffer.concat(chunks))));
    inflate.on('error', (err) => settle(() => reject(err)));
    inflate.end(gz);
  });
}

/**
 * The provider's side of a build: its base URL, a call to its API, a download of what it made,
 * and the checks a splat, a collider and a panorama pass before they are stored.
 */
function providerClient(opts: RemoteEngineOptions) {
  const ssrf = { allowLoopback: opts.allowLoopback };

  /**
   * The configured provider's base URL, checked. It is operator configuration, not user input,
   * so it may be a private or cluster address and is fetched without the user-URL SSRF guard.
   */
  function providerBase(): string {
    if (!opts.baseUrl)
      throw new UnrecoverableError('the room engine is set to remote but SPACE_PROVIDER_BASE_URL is not configured');
    let url: URL;
    try {
      url = new URL(opts.baseUrl);
    } catch {
      throw new UnrecoverableError('SPACE_PROVIDER_BASE_URL is not a valid URL (server configuration)');
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new UnrecoverableError('SPACE_PROVIDER_BASE_URL must be an http or https URL (server configuration)');
    return url.href.replace(/\/+$/, '');
  }

  /** One provider call; transport errors and 5xx retry later, 4xx (and redirects) fail the job. */
  async function call(
    method: 'GET' | 'POST',
    url: string,
    signal: AbortSignal,
    body?: unknown,
    extraHeaders: Record<string, string> = {},
  ): Promise<unknown> {
    let res: Response;
    try {
      res = await fetch(url, {
        method,
        redirect: 'manual',
        headers: {
          authorization: `Bearer ${opts.apiKey ?? ''}`,
          accept: 'application/json',
          ...(body ? { 'content-type': 'application/json' } : {}),
          ...extraHeaders,
        },
        body: body ? JSON.stringify(body) : undefined,
        signal: AbortSignal.any([signal, AbortSignal.timeout(30_000)]),
      });
    } catch (err) {
      if (signal.aborted) throw err;
      throw new RetryLaterError(`the world-generation provider could not be reached (${(err as Error).name})`);
    }
    let text: string;
    try {
      text = (await readLimited(res, 1024 * 1024, 'provider reply')).toString('utf8');
    } catch (err) {
      if (signal.aborted) throw err;
      throw new RetryLaterError(
        `the world-generation provider's reply could not be read (${err instanceof AppError ? err.message : (err as Error).name})`,
      );
    }
    if (res.status >= 500) throw new RetryLaterError(`the world-generation provider failed (HTTP ${res.status})`);
    if (!res.ok) {
      const detail = (() => {
        try {
          return clip(String((JSON.parse(text) as { error?: unknown }).error ?? ''));
        } catch {
          return '';
        }
      })();
      throw new UnrecoverableError(
        `the world-generation provider refused the request (HTTP ${res.status}${detail ? `: ${detail}` : ''})`,
      );
    }
    try {
      return JSON.parse(text);
    } catch {
      throw new UnrecoverableError('the world-generation provider answered something that is not JSON');
    }
  }

  async function download(url: string, what: string, signal: AbortSignal): Promise<Buffer> {
    try {
      const res = await guardedFetch(
        url,
        what,
        { signal: AbortSignal.any([signal, AbortSignal.timeout(120_000)]) },
        ssrf,
      );
      if (!res.ok)
        throw new UnrecoverableError(
          `the world-generation provider's ${what} could not be downloaded (HTTP ${res.status})`,
        );
      return await readLimited(res, opts.maxBytes, `the provider's ${what}`);
    } catch (err) {
      if (signal.aborted || err instanceof UnrecoverableError) throw err;
      throw new UnrecoverableError(
        err instanceof AppError ? err.message : `the world-generation provider's ${what} could not be downloaded`,
      );
    }
  }

  /** Download a splat, check its SPZ header, store it; answers our URL and the header's point count. */
  const splat = async (url: string, name: string, ctx: SpaceEngineContext) => {
    const bytes = await download(url, 'splat', ctx.signal);
    let header: Buffer;
    try {
      header = await gunzipHead(bytes, 16);
    } catch {
      throw new UnrecoverableError("the world-generation provider's splat is not an SPZ file (not gzip)");
    }
    if (header.length < 16 || header.readUInt32LE(0) !== SPZ_MAGIC)
      throw new UnrecoverableError("the world-generation provider's splat is not an SPZ file (wrong magic)");
    return { url: await ctx.store(bytes, 'application/octet-stream', name), gaussians: header.readUInt32LE(8) };
  };

  /** A collider is kept only as a binary glTF 2.0 file whose header length is its size. */
  const storeCollider = (bytes: Buffer, ctx: SpaceEngineContext) => {
    if (
      bytes.length < 12 ||
      bytes.readUInt32LE(0) !== GLB_MAGIC ||
      bytes.readUInt32LE(4) !== 2 ||
      bytes.readUInt32LE(8) !== bytes.length
    ) {
      throw new UnrecoverableError("the world-generation provider's collider is not a binary glTF 2.0 (GLB) file");
    }
    return ctx.store(bytes, 'model/gltf-binary', 'collider.glb');
  };

  /** A panorama is kept only as PNG or JPEG (told by its magic bytes). */
  const storePanorama = (bytes: Buffer, ctx: SpaceEngineContext) => {
    if (bytes.subarray(0, 4).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47])))
      return ctx.store(bytes, 'image/png', 'panorama.png');
    if (bytes[0] === 0xff && bytes[1] === 0xd8) return ctx.store(bytes, 'image/jpeg', 'panorama.jpg');
    throw new UnrecoverableError("the world-generation provider's panorama is neither PNG nor JPEG");
  };

  return { providerBase, call, download, splat, storeCollider, storePanorama };
}

export function createRemoteSpaceEngine(opts: RemoteEngineOptions): SpaceEngine {
  const { providerBase, call, download, splat, storeCollider, storePanorama } = providerClient(opts);

  return {
    name: REMOTE_ENGINE_NAME,
    async build({ plan }: SpaceEngineInput, ctx: SpaceEngineContext): Promise<SpaceResult> {
      const base = providerBase();
      let worldId = ctx.recall(RESUME.world);
      let createdAt = Number(ctx.recall(RESUME.createdAt)) || Date.now();
      if (worldId) {
        await ctx.progress('provider_resume', 'Resuming the world the provider is already building');
      } else {
        await ctx.progress('provider_create', 'Sending the inputs to the world-generation provider');
        const inputs =
          plan.source === 'video'
            ? { videoUrl: plan.videoUrl }
            : plan.source === 'photos'
              ? { imageUrls: plan.imageUrls }
              : { imageUrl: plan.imageUrl };
        const body = { source: plan.source, ...inputs, quality: plan.quality, title: plan.title };
        const created = z
          .object({ id: z.string().min(1).max(200) })
          .safeParse(await call('POST', `${base}/v1/worlds`, ctx.signal, body, { 'idempotency-key': ctx.jobId }));
        if (!created.success) throw new UnrecoverableError('the world-generation provider did not answer a world id');
        worldId = created.data.id;
        createdAt = Date.now();
        await ctx.remember(RESUME.world, worldId);
        await ctx.remember(RESUME.createdAt, String(createdAt));
      }
      const statusUrl = `${base}/v1/worlds/${encodeURIComponent(worldId)}`;

      const notes = [
        `Built by a hosted world-generation provider (${REMOTE_ENGINE_NAME} adapter); what the inputs did not show is generated by it.`,
      ];
      const blank: SpaceResult = {
        stage: 'preview',
        imagined: true,
        source: plan.source,
        photoCount: plan.source === 'photos' ? plan.imageUrls!.length : plan.source === 'photo' ? 1 : 0,
        panoramaUrl: null,
        spaceUrl: null,
        spaceFullUrl: null,
        format: null,
        metricScale: null,
        floorOffsetM: null,
        colliderUrl: null,
        depthUrl: null,
        posterUrl: null,
        gaussians: null,
        dimensions: null,
        engine: REMOTE_ENGINE_NAME,
        notes,
      };
      let preview: SpaceResult | null = null;
      const deadline = createdAt + opts.timeoutMs;
      const timedOut = () =>
        new UnrecoverableError(
          `the world-generation provider did not finish within ${Math.round(opts.timeoutMs / 1000)} s`,
        );
      let failures = 0;
      for (;;) {
        let reply: unknown;
        try {
          reply = await call('GET', statusUrl, ctx.signal);
        } catch (err) {
          if (!(err instanceof RetryLaterError)) throw err;
          // Rerunning the job would not help (the world exists): wait longer each time, until the deadline.
          failures++;
          const wait = Math.min(opts.pollMs * 2 ** failures, MAX_BACKOFF_MS);
          if (Date.now() + wait > deadline) throw timedOut();
          await ctx.progress(
            'provider_unreachable',
            'The world-generation provider did not answer; asking again shortly',
          );
          await sleep(wait, undefined, { signal: ctx.signal });
          continue;
        }
        failures = 0;
        const parsed = WorldStatus.safeParse(reply);
        if (!parsed.success)
          throw new UnrecoverableError(
            'the world-generation provider answered a status this adapter does not understand',
          );
        const st: WorldStatus = parsed.data;
        if (st.status === 'failed')
          throw new UnrecoverableError(
            `the world-generation provider could not build the room${st.error ? `: ${clip(st.error)}` : ''}`,
          );
        if (st.quick && !preview) {
          const quick = await splat(st.quick.splatUrl, 'space-quick.spz', ctx);
          preview = {
            ...blank,
            spaceUrl: quick.url,
            format: 'spz',
            gaussians: quick.gaussians,
            notes: [...notes, "The quick room is in the provider's own units (metricScale null)."],
          };
          if (st.status !== 'succeeded') await ctx.publishPreview(preview);
        }
        if (st.status === 'succeeded') {
          if (!st.full) {
            if (!preview) throw new UnrecoverableError('the world-generation provider finished without a splat');
            const why =
              plan.quality === 'preview'
                ? 'Only the preview was requested (quality preview).'
                : 'The provider delivered only the quick room.';
            return { ...preview, notes: [...preview.notes, why] };
          }
          const full = st.full;
          const fullSplat = await splat(full.splatUrl, 'space-full.spz', ctx);
          const spaceFullUrl = fullSplat.url;
          const colliderUrl = full.colliderUrl
            ? await storeCollider(await download(full.colliderUrl, 'collider', ctx.signal), ctx)
            : null;
          const panoramaUrl = full.panoramaUrl
            ? await storePanorama(await download(full.panoramaUrl, 'panorama', ctx.signal), ctx)
            : null;
          return {
            ...(preview ?? blank),
            stage: 'space',
            spaceUrl: preview?.spaceUrl ?? spaceFullUrl,
            spaceFullUrl,
            format: 'spz',
            metricScale: full.metricScale,
            floorOffsetM: full.floorOffsetM ?? null,
            colliderUrl,
            panoramaUrl,
            gaussians: fullSplat.gaussians,
            notes: [
              ...(preview?.notes ?? notes),
              `The full room is ${fullSplat.gaussians} Gaussians (counted in the file); metric scale and floor offset as the provider reported them.`,
            ],
          };
        }
        if (Date.now() > deadline) throw timedOut();
        await ctx.progress(`provider_${st.status}`, 'The world-generation provider is building the room');
        await sleep(opts.pollMs, undefined, { signal: ctx.signal });
      }
    },
  };
}
