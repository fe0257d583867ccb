import { UnrecoverableError } from '../../pool/errors';
import { chatComplete, type ChatMessage } from '../openai-chat';
import type { CodeEngine, CodeEngineOutput } from './code.engine';

/**
 * openai-compatible: asks an OpenAI-compatible chat-completions API (workers/engines/openai-chat.ts)
 * for one self-contained HTML file, and a plan first when asked.
 */
export function createOpenAiCodeEngine(opts: {
  baseUrl: string;
  apiKey?: string;
  model: string;
  timeoutMs?: number;
}): CodeEngine {
  const call = async (messages: ChatMessage[], signal: AbortSignal): Promise<string> =>
    (await chatComplete({ ...opts, label: 'code provider' }, messages, { signal })).content;

  return {
    name: `openai-compatible:${opts.model}`,
    async build(input, ctx): Promise<CodeEngineOutput> {
      let plan: string | null = null;
      if (input.planFirst) {
        await ctx.progress('planning', 'Asking the provider for a plan');
        plan = await call(
          [
            {
              role: 'system',
              content: 'You plan small single-page web apps. Answer in Markdown: goal, features, steps.',
            },
            { role: 'user', content: input.prompt },
          ],
          ctx.signal,
        );
      }
      await ctx.progress('generating', 'Asking the provider for the app');
      const answer = await call(
        [
          {
            role: 'system',
            content: `Write ONE self-contained HTML file (inline CSS and JS, no external URLs) for the app the user describes. ${
              input.framework === 'react'
                ? 'Use React 18 via React.createElement with no build step.'
                : 'Use plain JavaScript.'
            } Title: ${input.name}. Answer with the file in a single \`\`\`html block.`,
          },
          ...(plan ? [{ role: 'assistant' as const, content: plan }] : []),
          { role: 'user', content: input.prompt },
        ],
        ctx.signal,
      );
      const m = /```html\s*([\s\S]*?)```/i.exec(answer);
      const html = (m?.[1] ?? answer).trim();
      if (!/<html[\s>]/i.test(html)) throw new UnrecoverableError('code provider did not return an HTML document');
      return { html: `${html}\n`, plan, summary: `App written by ${opts.model}.` };
    },
  };
}
