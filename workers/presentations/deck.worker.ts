import {
  DeckJobInput,
  OutlineItem,
  type DeckResult,
  type DeckSlide,
  type DeckTheme,
} from '../../contracts/presentations';
import type { Config } from '../../platform/infra/config';
import { createProjects } from '../../platform/projects/projects.repository';
import { openUrlOf } from '../../contracts/projects';
import type { Runtime } from '../../platform/runtime';
import { fetchInput } from '../../platform/infra/ssrf';
import type { DeckEngine } from '../engines/presentations/deck.engine';
import { createLocalDeckEngine } from '../engines/presentations/local.engine';
import { createOpenAiDeckEngine } from '../engines/presentations/openai.engine';
import { UnrecoverableError } from '../pool/errors';
import type { PoolDefinition } from '../pool/pool';
import { renderSlide, SLIDE_H, SLIDE_W } from './render';
import { THEMES, themeFromHtml } from './theme';

export function deckEngineFrom(config: Config): DeckEngine {
  return config.DECK_ENGINE === 'openai'
    ? createOpenAiDeckEngine({
        baseUrl: config.OPENAI_BASE_URL,
        apiKey: config.OPENAI_API_KEY,
        model: config.OPENAI_MODEL,
      })
    : createLocalDeckEngine();
}

const BRAND_PAGE_MAX_BYTES = 1024 * 1024;

/**
 * The deck pool: theme (built-in, or extracted from the brand page through the SSRF guard),
 * outline (as written, or authored from the brief by the engine), then one PNG per slide in the
 * blob store, a deck manifest, and the build recorded on the presentation project. A slide that
 * cannot be built is reported failed and the deck is `partial`; a deck with no slide fails.
 * Length: a pool definition whose process (140 lines) is the deck's pipeline in order: theme, outline, one
 * PNG per slide, manifest, build record, sharing the job's state.
 */
export function deckWorker(
  rt: Runtime,
  engine: DeckEngine = deckEngineFrom(rt.config),
): PoolDefinition<DeckJobInput, DeckResult> {
  const projects = createProjects(rt.store);
  const ssrf = { allowLoopback: rt.config.ALLOW_LOOPBACK_URLS };

  const brandTheme = async (url: string, signal: AbortSignal): Promise<DeckTheme> => {
    const page = await fetchInput(url, 'brandUrl', {
      ...ssrf,
      headers: { accept: 'text/html' },
      signal,
      answerMs: Math.min(rt.config.INPUT_FETCH_TIMEOUT_MS, 10_000),
      totalMs: 10_000,
      maxBytes: BRAND_PAGE_MAX_BYTES,
    });
    const html = page.toString('utf8');
    const theme = themeFromHtml(html, new URL(url).host);
    if (!theme) throw new Error('the brand page names no usable colour');
    return theme;
  };

  return {
    pool: 'deck',
    input: DeckJobInput,
    async process(input, ctx) {
      const accountId = ctx.job.accountId;
      const notes: string[] = [];
      const mine = projects.forAccount(accountId);
      const project = await mine.get(input.projectId);
      if (!project) throw new UnrecoverableError('the presentation was deleted before its slides were built');

      let theme = THEMES[input.themeId ?? 'default'] ?? THEMES.default!;
      if (input.brandUrl) {
        await ctx.progress('theming', `Reading brand colours from ${new URL(input.brandUrl).host}`);
        try {
          theme = await brandTheme(input.brandUrl, ctx.signal);
        } catch (err) {
          notes.push(
            `brandUrl: ${(err as Error).message.replace(/^brandUrl: /, '')}; the ${theme.id} theme was used instead`,
          );
        }
      }

      let items: unknown[];
      if (input.outline?.length) items = input.outline;
      else {
        const authored = await engine.authorOutline(
          {
            name: input.name,
            brief: input.brief ?? '',
            slideCount: input.slideCount,
            companyName: input.companyName,
            visualStyle: input.visualStyle,
          },
          { signal: ctx.signal, progress: ctx.progress },
        );
        items = authored.items;
        if (engine.offline) {
          notes.push(
            `outline: written offline by ${engine.name} from the brief's own sentences (no language model); set DECK_ENGINE=openai for a model-written outline`,
          );
          if (items.length < input.slideCount)
            notes.push(
              `outline: the brief holds enough for ${items.length} slides, so ${items.length} were written instead of the ${input.slideCount} asked, rather than filler`,
            );
        }
        notes.push(...authored.notes);
      }

      const slides: DeckSlide[] = [];
      for (const [index, item] of items.entries()) {
        const parsed = OutlineItem.safeParse(item);
        const title = parsed.success
          ? parsed.data.title
          : typeof (item as { title?: unknown })?.title === 'string'
            ? String((item as { title: string }).title)
            : `Slide ${index + 1}`;
        await ctx.progress('rendering', `Rendering slide ${index + 1} of ${items.length}: ${title.slice(0, 60)}`);
        if (ctx.signal.aborted) throw ctx.signal.reason;
        const failed = (error: string): DeckSlide => ({
          index,
          title,
          bullets: [],
          status: 'failed',
          imageUrl: null,
          contentUrl: null,
          width: SLIDE_W,
          height: SLIDE_H,
          error,
        });
        if (!parsed.success) {
          slides.push(failed('the outline item has no usable title and bullets'));
          continue;
        }
        try {
          const { png, layout } = await renderSlide({
            slide: parsed.data,
            index,
            total: items.length,
            deckName: input.name,
            companyName: input.companyName,
            theme,
            visualStyle: input.visualStyle,
            mode: input.slideMode,
          });
          const num = String(index + 1).padStart(2, '0');
          const imageName = input.slideMode === 'creator' ? `slide-${num}.png` : `slide-${num}-background.png`;
          const image = await rt.blobs.put(png, { contentType: 'image/png', filename: imageName, accountId });
          const imageUrl = rt.blobs.url(image.id, imageName);
          let contentUrl: string | null = null;
          if (layout) {
            const json = Buffer.from(JSON.stringify({ ...layout, background: { imageUrl } }, null, 2));
            const blob = await rt.blobs.put(json, {
              contentType: 'application/json',
              filename: `slide-${num}.json`,
              accountId,
            });
            contentUrl = rt.blobs.url(blob.id, `slide-${num}.json`);
          }
          slides.push({
            index,
            title,
            bullets: parsed.data.bullets,
            status: 'built',
            imageUrl,
            contentUrl,
            width: SLIDE_W,
            height: SLIDE_H,
            error: null,
          });
        } catch (err) {
          ctx.log.warn('slide failed', { index, err: err as Error });
          slides.push(failed(`rendering failed: ${(err as Error).message}`));
        }
      }
      const built = slides.filter((s) => s.status === 'built').length;
      if (built === 0) throw new UnrecoverableError('no slide could be built');

      await ctx.progress('saving', `Saving the deck (${built} of ${slides.length} slides)`);
      const openUrl = openUrlOf(rt.config.PUBLIC_BASE_URL, 'presentation', input.projectId);
      const result: DeckResult = {
        projectId: input.projectId,
        name: input.name,
        engine: input.outline?.length ? 'outline-as-written' : engine.name,
        slideMode: input.slideMode,
        slideCount: built,
        requestedSlides: slides.length,
        partial: built < slides.length,
        theme,
        slides,
        openUrl,
        notes,
      };
      const manifest = Buffer.from(JSON.stringify(result, null, 2));
      const mblob = await rt.blobs.put(manifest, { contentType: 'application/json', filename: 'deck.json', accountId });
      const manifestUrl = rt.blobs.url(mblob.id, 'deck.json');
      await mine.saveBuild(input.projectId, {
        status: result.partial ? 'partial' : 'built',
        theme,
        slides,
        manifestUrl,
        builtAt: new Date(),
      });
      return result;
    },
    eventExtras: (r) => ({ projectId: r.projectId, slideCount: r.slideCount, partial: r.partial, openUrl: r.openUrl }),
  };
}
