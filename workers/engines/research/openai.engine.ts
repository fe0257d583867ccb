import { chatComplete } from '../openai-chat';
import type { ResearchEngine, ResearchEngineOutput } from './research.engine';

/**
 * openai-compatible: the workspace sources found and read are handed to an OpenAI-compatible
 * chat-completions API (`POST {base}/chat/completions`, Bearer key), which writes the report;
 * the sources list is appended by us so citations always resolve. totalTokens takes the
 * provider's `usage.total_tokens`. 429 and 5xx are transient (retried); other 4xx are not.
 */
export function createOpenAiResearchEngine(opts: {
  baseUrl: string;
  apiKey?: string;
  model: string;
  timeoutMs?: number;
  maxCharsPerSource?: number;
}): ResearchEngine {
  const perSource = opts.maxCharsPerSource ?? 4000;
  return {
    name: `openai-compatible:${opts.model}`,
    async write(input, ctx): Promise<ResearchEngineOutput> {
      await ctx.progress(
        'writing',
        `Asking the model to write the report from ${input.sources.length} source${input.sources.length === 1 ? '' : 's'}`,
      );
      const context = input.sources
        .map((s) => `[${s.n}] ${s.title} (${s.kind}, ${s.url})\n${s.text.slice(0, perSource)}`)
        .join('\n\n---\n\n');
      const { content: text, totalTokens } = await chatComplete(
        { ...opts, label: 'research provider' },
        [
          {
            role: 'system',
            content:
              'You are a research assistant. Write a Markdown report answering the question from the numbered workspace sources only. Start with "# Research: <question>", then "## Summary" and "## Findings". Cite sources as [n]. Say plainly when the sources do not answer.',
          },
          { role: 'user', content: `Question: ${input.query}\n\nSources:\n\n${context || '(no sources found)'}` },
        ],
        { signal: ctx.signal },
      );
      const sources = input.sources.length
        ? `\n\n## Sources\n\n${input.sources.map((s) => `${s.n}. [${s.title}](${s.url}) (${s.domain})`).join('\n')}\n`
        : '\n';
      const unread = input.unread.length
        ? `\n## Not read\n\n${input.unread.map((u) => `- ${u.title}: ${u.reason}`).join('\n')}\n`
        : '';
      return { content: text.trim() + sources + unread, tokensUsed: totalTokens };
    },
  };
}
