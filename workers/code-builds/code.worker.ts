import { createHash } from 'node:crypto';
import { CodeBuildRequest, type CodeBuildResult } from '../../contracts/code-builds';
import type { Config } from '../../platform/infra/config';
import type { Runtime } from '../../platform/runtime';
import type { CodeEngine } from '../engines/code-builds/code.engine';
import { createLocalCodeEngine } from '../engines/code-builds/local.engine';
import { createOpenAiCodeEngine } from '../engines/code-builds/openai.engine';
import type { PoolDefinition } from '../pool/pool';

export function codeEngineFrom(config: Config): CodeEngine {
  return config.CODE_ENGINE === 'openai'
    ? createOpenAiCodeEngine({
        baseUrl: config.OPENAI_BASE_URL,
        apiKey: config.OPENAI_API_KEY,
        model: config.OPENAI_MODEL,
      })
    : createLocalCodeEngine();
}

const nameFrom = (prompt: string) =>
  prompt
    .replace(/[^\p{L}\p{N}\s-]/gu, ' ')
    .split(/\s+/)
    .filter(Boolean)
    .slice(0, 6)
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join(' ') || 'Untitled App';

/** The code pool: prompt → one runnable HTML file (and a plan) in the blob store. */
export function codeWorker(
  rt: Runtime,
  engine: CodeEngine = codeEngineFrom(rt.config),
): PoolDefinition<CodeBuildRequest, CodeBuildResult> {
  return {
    pool: 'code',
    input: CodeBuildRequest,
    async process(req, ctx) {
      const framework =
        req.framework === 'react' || (req.framework !== 'html' && /\breact\b/i.test(req.prompt)) ? 'react' : 'html';
      const name = req.name?.trim() || nameFrom(req.prompt);
      // Benchmarks only (npm run bench pipeline): claimed, then completed; no engine, no file.
      if (rt.config.CODE_ENGINE === 'bench-no-work')
        return {
          name,
          framework,
          engine: 'bench-no-work',
          appUrl: '',
          files: [],
          plan: null,
          summary: 'nothing built',
        };
      const out = await engine.build(
        { name, prompt: req.prompt, framework, planFirst: req.planFirst ?? false },
        { signal: ctx.signal, progress: ctx.progress },
      );
      await ctx.progress('storing', 'Saving the app');
      const files: CodeBuildResult['files'] = [];
      const store = async (path: string, mimeType: string, text: string) => {
        const data = Buffer.from(text, 'utf8');
        const blob = await rt.blobs.put(data, { contentType: mimeType, filename: path, accountId: ctx.job.accountId });
        const url = rt.blobs.url(blob.id, path);
        files.push({
          path,
          url,
          mimeType,
          sizeBytes: data.length,
          sha256: createHash('sha256').update(data).digest('hex'),
        });
        return url;
      };
      const appUrl = await store('index.html', 'text/html; charset=utf-8', out.html);
      if (out.plan) await store('PLAN.md', 'text/markdown; charset=utf-8', out.plan);
      return { name, framework, engine: engine.name, appUrl, files, plan: out.plan, summary: out.summary };
    },
    eventExtras: (r) => ({ appUrl: r.appUrl }),
  };
}
