import { saveLimited } from '../../../platform/infra/ssrf';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { RetryLaterError, UnrecoverableError } from '../../pool/errors';
import type { VideoEngine, VideoRenderOutput } from './video.engine';

interface ProviderVideo {
  id: string;
  status: 'queued' | 'in_progress' | 'completed' | 'failed';
  progress?: number;
  error?: { code?: string; message?: string } | null;
}

/**
 * openai-compatible:<model>: the OpenAI videos protocol, create then poll then download:
 *   POST {base}/videos { model, prompt, seconds, size }        → { id, status: queued, progress }
 *   GET  {base}/videos/{id}                                     → { status: queued | in_progress | completed | failed, progress, error }
 *   GET  {base}/videos/{id}/content                             → the MP4 bytes
 * 429, 5xx and network errors are transient (the pool retries, then fails and refunds); a
 * provider `failed` status or another 4xx fails the job at once (refunded). Reference images are
 * not sent through this JSON protocol: a note says so. The base URL is operator configuration,
 * not user input, so it does not pass the SSRF guard.
 */
export function createRemoteVideoEngine(opts: {
  baseUrl: string;
  apiKey?: string;
  model: string;
  pollMs: number;
  timeoutMs?: number;
}): VideoEngine {
  const base = opts.baseUrl.replace(/\/$/, '');
  const headers = {
    'content-type': 'application/json',
    ...(opts.apiKey ? { authorization: `Bearer ${opts.apiKey}` } : {}),
  };

  const call = async (method: string, url: string, signal: AbortSignal, body?: unknown): Promise<Response> => {
    let res: Response;
    try {
      res = await fetch(url, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.any([signal, AbortSignal.timeout(60_000)]),
      });
    } catch (err) {
      if (signal.aborted) throw err;
      throw new RetryLaterError(`video provider unreachable: ${(err as Error).message}`);
    }
    if (res.status === 429 || res.status >= 500) {
      const after = Number(res.headers.get('retry-after'));
      throw new RetryLaterError(
        `video provider answered ${res.status}`,
        Number.isFinite(after) && after > 0 ? after * 1000 : undefined,
      );
    }
    if (!res.ok) {
      const text = await res.text().catch(() => '');
      const msg = /"message"\s*:\s*"([^"]{1,200})"/.exec(text)?.[1];
      throw new UnrecoverableError(`video provider refused the request (${res.status})${msg ? `: ${msg}` : ''}`);
    }
    return res;
  };

  return {
    name: `openai-compatible:${opts.model}`,
    async render({ plan, openingFramePath, subjectColours }, ctx): Promise<VideoRenderOutput> {
      const notes: string[] = [];
      if (openingFramePath || subjectColours.length)
        notes.push(
          'The remote video provider adapter sends no reference images; the video was rendered from the prompt alone.',
        );
      await ctx.progress('provider_submitting', 'Submitting the render to the video provider');
      const created = (await (
        await call('POST', `${base}/videos`, ctx.signal, {
          model: opts.model,
          prompt: plan.prompt,
          seconds: String(plan.clipSeconds),
          size: `${plan.width}x${plan.height}`,
        })
      ).json()) as ProviderVideo;
      if (!created.id) throw new UnrecoverableError('video provider returned no id');
      const deadline = Date.now() + (opts.timeoutMs ?? 30 * 60_000);
      let v = created;
      let last = '';
      // A transient error while polling is retried here (bounded), not by re-running the job:
      // that would create a second provider render and abandon the first.
      const poll = async (url: string, signal: AbortSignal): Promise<ProviderVideo> => {
        for (let attempt = 1; ; attempt++) {
          try {
            return (await (await call('GET', url, signal)).json()) as ProviderVideo;
          } catch (err) {
            if (!(err instanceof RetryLaterError) || attempt >= 5) throw err;
            await sleep(Math.min(10_000, opts.pollMs * 2 ** attempt), undefined, { signal });
          }
        }
      };
      while (v.status !== 'completed') {
        if (v.status === 'failed')
          throw new UnrecoverableError(`video provider failed the render: ${v.error?.message ?? 'no reason given'}`);
        const msg = `Provider ${v.status.replace('_', ' ')}${typeof v.progress === 'number' ? `: ${Math.round(v.progress)}%` : ''}`;
        if (msg !== last) {
          await ctx.progress(`provider_${v.status}`, msg);
          last = msg;
        }
        if (Date.now() > deadline) throw new UnrecoverableError('video provider did not finish in time');
        await sleep(opts.pollMs, undefined, { signal: ctx.signal });
        v = await poll(`${base}/videos/${encodeURIComponent(created.id)}`, ctx.signal);
      }
      await ctx.progress('provider_downloading', 'Downloading the video from the provider');
      const res = await call('GET', `${base}/videos/${encodeURIComponent(created.id)}/content`, ctx.signal);
      const file = path.join(ctx.workDir, 'video.mp4');
      await saveLimited(res, file, 2 * 1024 ** 3, 'provider video');
      return { file, notes };
    },
  };
}
