import { ResearchJobInput, type ResearchResult } from '../../contracts/research';
import type { Config } from '../../platform/infra/config';
import type { Runtime } from '../../platform/runtime';
import { createLocalResearchEngine } from '../engines/research/local.engine';
import { createOpenAiResearchEngine } from '../engines/research/openai.engine';
import { countTokens, type ReadSource, type ResearchEngine } from '../engines/research/research.engine';
import type { PoolDefinition } from '../pool/pool';
import { createWorkspace } from './workspace';

export function researchEngineFrom(config: Config): ResearchEngine {
  return config.RESEARCH_ENGINE === 'openai'
    ? createOpenAiResearchEngine({
        baseUrl: config.OPENAI_BASE_URL,
        apiKey: config.OPENAI_API_KEY,
        model: config.OPENAI_MODEL,
      })
    : createLocalResearchEngine();
}

/**
 * The research pool: search the account's workspace, read the best sources, write a Markdown
 * report. Raw status tokens: started → searching → reading → writing → complete (the legacy
 * endpoint shows `partial` when some sources could not be read).
 */
export function researchWorker(
  rt: Runtime,
  engine: ResearchEngine = researchEngineFrom(rt.config),
): PoolDefinition<ResearchJobInput, ResearchResult> {
  const workspace = createWorkspace({ store: rt.store, blobs: rt.blobs, jobs: rt.jobs });
  const domain = new URL(rt.config.PUBLIC_BASE_URL).host;
  return {
    pool: 'research',
    input: ResearchJobInput,
    async process(req, ctx) {
      const accountId = ctx.job.accountId;
      const { candidates, searchCount } = await workspace.search(accountId, req.query, {
        excludeJobId: ctx.job._id,
        drive: req.drive,
        signal: ctx.signal,
        onSearch: (what) =>
          ctx.progress('searching', `Searching ${what.replace('_', ' ')} for "${req.query.slice(0, 80)}"`),
      });
      const picked = candidates.slice(0, rt.config.RESEARCH_MAX_SOURCES);
      const sources: ReadSource[] = [];
      const unread: { title: string; reason: string }[] = [];
      let readTokens = 0;
      for (const [i, c] of picked.entries()) {
        await ctx.progress('reading', `Reading source ${i + 1} of ${picked.length}: ${c.title.slice(0, 80)}`);
        try {
          const text = await c.read();
          readTokens += countTokens(text);
          sources.push({
            n: sources.length + 1,
            kind: c.kind,
            title: c.title,
            url: rt.config.PUBLIC_BASE_URL + c.path,
            domain,
            text,
          });
        } catch (err) {
          unread.push({ title: c.title, reason: (err as Error).message });
        }
        if (ctx.signal.aborted) throw ctx.signal.reason;
      }
      const out = await engine.write(
        { query: req.query, sources, unread },
        { signal: ctx.signal, progress: ctx.progress },
      );
      const totalTokens = out.tokensUsed ?? countTokens(req.query) + readTokens + countTokens(out.content);
      return {
        engine: engine.name,
        content: out.content,
        sources: sources.map(({ url, title, domain: d }) => ({ url, title, domain: d })),
        searchCount,
        readCount: sources.length,
        failedReads: unread.length,
        totalTokens,
        partial: unread.length > 0,
      };
    },
    eventExtras: (r) => ({ partial: r.partial, readCount: r.readCount }),
  };
}
