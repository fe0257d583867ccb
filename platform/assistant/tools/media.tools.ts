import { z } from 'zod';
import { CodeBuildRequest } from '../../../contracts/code-builds';
import { text } from '../../../contracts/common';
import { IMAGE_ASPECT_RATIOS, type ImageResult } from '../../../contracts/images';
import { JOB_ID_PREFIX } from '../../../contracts/registry';
import { ResearchRequest } from '../../../contracts/research';
import { SongRequest } from '../../../contracts/songs';
import { VideoRequest } from '../../../contracts/videos';
import { createBlobStore } from '../../infra/media-blobs';
import { resolveImageEngine } from '../../images/images.rules';
import { isDuplicateKey } from '../../infra/mongo';
import { paidCall } from '../../credits/paid-call';
import { createProjectsService } from '../../projects/projects.service';
import { createResearchService } from '../../research/research.service';
import type { Runtime } from '../../runtime';
import { createSongsService } from '../../songs/songs.service';
import { parseOrThrow } from '../../infra/validation';
import { createVideosService } from '../../videos/videos.service';
import { createImageDeliveries, type DeliveredImage as Rendered } from '../assistant.repository';
import type { ToolDefinition } from '../tool';
import { jobData, projectArtifact, titleFrom } from './artifacts';

const prompt = (max: number, what: string) => text(max).trim().min(1, { error: 'must not be empty' }).describe(what);

/** Media: images (a paid call to the image pool), and video, songs, code builds and research as charged jobs. */
// Length: a list of 7 tool definitions sharing the services built above them; each is a literal, the longest
// run is 47 lines.
export function mediaTools(rt: Runtime): ToolDefinition[] {
  const base = rt.config.PUBLIC_BASE_URL;
  const videos = createVideosService(rt);
  const songs = createSongsService(rt);
  const research = createResearchService(rt);
  const projects = createProjectsService(rt);
  const blobs = createBlobStore(rt.store, {
    secret: rt.config.ASSET_SIGNING_SECRET,
    publicBaseUrl: base,
    defaultTtlSeconds: rt.config.ASSET_URL_TTL_SECONDS,
  });
  const deliveries = createImageDeliveries(rt.store);

  /** A stored signed link, signed again from now (a repeated call answers a link that still opens). */
  const resign = (url: string) => {
    const m = /\/api\/v1\/assets\/([A-Za-z0-9_-]{1,128})\/([^/?#]+)\?/.exec(url);
    return m ? blobs.url(m[1]!, decodeURIComponent(m[2]!)) : url;
  };
  const imageArtifact = (promptText: string, r: Rendered) => ({
    type: 'image' as const,
    title: titleFrom(promptText),
    data: {
      url: resign(r.url),
      width: r.width,
      height: r.height,
      aspectRatio: r.aspectRatio,
      engine: r.engine,
      renderer: r.renderer,
      notes: r.notes,
    },
  });

  const generateImage: ToolDefinition<{ prompt: string; aspectRatio?: (typeof IMAGE_ASPECT_RATIOS)[number] }> = {
    name: 'generate_image',
    description: 'Draw an image from a description (a paid render; answers the image URL).',
    input: z.strictObject({
      prompt: prompt(4000, 'What to draw.'),
      aspectRatio: z
        .enum(IMAGE_ASPECT_RATIOS, { error: `must be one of ${IMAGE_ASPECT_RATIOS.join(', ')}` })
        .optional()
        .describe('Default 1:1.'),
    }),
    scope: 'ai',
    spends: ['image'],
    async run(args, ctx) {
      const accountId = ctx.account._id;
      const id = ctx.idFor('img');
      const mine = deliveries.forAccount(accountId);
      const done = await mine.find(id);
      if (done) return imageArtifact(done.prompt, done.result);
      const { engine, notes } = resolveImageEngine({ plan: ctx.account.plan, features: ctx.account.features });
      const { result } = await paidCall<Omit<ImageResult, 'charged'>, Rendered>(rt, {
        pool: 'image',
        operation: 'image',
        payload: {
          kind: 'image',
          accountId,
          prompt: args.prompt,
          engine,
          aspectRatio: args.aspectRatio ?? '1:1',
          style: null,
          referenceImageUrls: [],
          includeBase64: false,
          notes,
        },
        timeoutMs: rt.config.IMAGE_RPC_TIMEOUT_MS,
        charge: 'image',
        accountId,
        requestId: ctx.requestId,
        // A repeat after a crash takes over the hold the first call left, and finds its delivery.
        holdId: ctx.idFor('hold'),
        deliveredBy: { collection: deliveries.collection, id },
        async deliver(answer, guard) {
          const { base64: _inline, ...rendered } = answer;
          await guard();
          try {
            await mine.insert({
              _id: id,
              prompt: args.prompt,
              result: rendered,
              createdAt: new Date(),
            });
          } catch (err) {
            if (!isDuplicateKey(err)) throw err;
            return (await mine.find(id))?.result ?? rendered;
          }
          return rendered;
        },
      });
      return imageArtifact(args.prompt, result);
    },
  };

  const generateVideo: ToolDefinition<{ prompt: string }> = {
    name: 'generate_video',
    description: 'Render a short video clip from a description (a charged job; poll it).',
    input: z.strictObject({ prompt: prompt(4000, 'What happens in the clip.') }),
    scope: 'ai',
    spends: ['video_standard', 'video_premium'],
    async run(args, ctx) {
      const request = parseOrThrow(VideoRequest, { prompt: args.prompt });
      const { envelope } = await videos.dispatch({
        account: ctx.account,
        requestId: ctx.requestId,
        jobId: ctx.idFor(JOB_ID_PREFIX.video),
        request,
      });
      return {
        type: 'video',
        title: titleFrom(args.prompt),
        data: jobData(envelope.jobId, { status: envelope.status, notes: envelope.notes }),
      };
    },
  };

  const composeSong: ToolDefinition<{ prompt: string; style?: string }> = {
    name: 'compose_song',
    description: 'Compose a song (music and lyrics) from what it is about and a style (a charged job; poll it).',
    input: z.strictObject({
      prompt: prompt(900, 'What the song is about.'),
      style: text(200)
        .trim()
        .min(1, { error: 'must not be empty' })
        .optional()
        .describe('Genre, mood, instruments, or "in the style of" a kind of music.'),
    }),
    scope: 'ai',
    spends: ['song'],
    async run(args, ctx) {
      const songTitle = titleFrom(args.prompt, 60);
      const style = !args.style
        ? args.prompt
        : args.prompt.toLowerCase().includes(args.style.toLowerCase())
          ? args.style
          : `${args.style}, about ${args.prompt}`;
      const request = parseOrThrow(SongRequest, { style, title: songTitle });
      const { envelope } = await songs.dispatch({
        accountId: ctx.account._id,
        requestId: ctx.requestId,
        jobId: ctx.idFor(JOB_ID_PREFIX.song),
        request,
      });
      return {
        type: 'song',
        title: songTitle,
        data: jobData(envelope.jobId, { status: envelope.status, style: args.style ?? null }),
      };
    },
  };

  const buildCode: ToolDefinition<{ prompt: string }> = {
    name: 'build_code',
    description:
      'Build a small runnable web app from a description (a charged code-build job; opens in the code editor).',
    input: z.strictObject({ prompt: prompt(20_000, 'What the app should do.') }),
    scope: 'ai',
    spends: ['code_build'],
    async run(args, ctx) {
      const accountId = ctx.account._id;
      const request = parseOrThrow(CodeBuildRequest, { prompt: args.prompt });
      const name = titleFrom(args.prompt, 80);
      // The project first (accept's `before`), then the charge: a project that cannot be stored
      // fails the call before anything is charged; a short balance (402) takes the project away
      // again. A repeat finds both by their ids.
      let project: Awaited<ReturnType<typeof projects.create>> | undefined;
      const { job } = await rt.jobs.accept({
        accountId,
        requestId: ctx.requestId,
        jobId: ctx.idFor(JOB_ID_PREFIX.code),
        type: 'code',
        operation: 'code_build',
        input: request,
        before: async (jobId) => {
          project = await projects.create({
            accountId,
            kind: 'code',
            name,
            description: args.prompt.slice(0, 2000),
            content: { prompt: args.prompt, jobId },
            idFor: ctx.idFor,
          });
        },
        undo: async () => {
          if (project) await projects.remove(accountId, project._id, undefined).catch(() => undefined);
        },
      });
      const made = project!;
      return projectArtifact({
        type: 'document',
        title: made.name,
        kind: 'code',
        projectId: made._id,
        publicBaseUrl: base,
        data: jobData(job._id, { status: job.status, kind: 'code_build' }),
      });
    },
  };

  const startResearch: ToolDefinition<{ query: string }> = {
    name: 'start_research',
    description: 'Research a question over the workspace sources and write a report (a charged job; poll it).',
    input: z.strictObject({ query: prompt(4000, 'What to research.') }),
    scope: 'ai',
    spends: ['research'],
    async run(args, ctx) {
      const request = parseOrThrow(ResearchRequest, { query: args.query });
      const { envelope } = await research.dispatch({
        accountId: ctx.account._id,
        requestId: ctx.requestId,
        jobId: ctx.idFor(JOB_ID_PREFIX.research),
        request,
        key: ctx.key,
      });
      return {
        type: 'document',
        title: `Research: ${titleFrom(args.query, 70)}`,
        data: jobData(envelope.jobId, { status: envelope.status, kind: 'research' }),
      };
    },
  };

  return [generateImage, generateVideo, composeSong, buildCode, startResearch];
}
