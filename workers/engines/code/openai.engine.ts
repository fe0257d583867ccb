import { RetryLaterError, UnrecoverableError } from '../../pool/errors';
import type { CodeEngine, CodeEngineOutput } from './code.engine';

/**
 * openai-compatible: asks an OpenAI-compatible chat-completions API for one self-contained HTML
 * file (and a plan first when asked). 429 and 5xx are transient (retried); other 4xx are not.
 * The provider URL is operator configuration, not user input, so it does not pass the SSRF guard.
 */
export function createOpenAiCodeEngine(opts: { baseUrl: string; apiKey?: string; model: string; timeoutMs?: number }): CodeEngine {
  const call = async (messages: { role: string; content: string }[], signal: AbortSignal): Promise<string> => {
    const timeout = AbortSignal.timeout(opts.timeoutMs ?? 120_000);
    let res: Response;
    try {
      res = await fetch(`${opts.baseUrl.replace(/\/$/, '')}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(opts.apiKey ? { authorization: `Bearer ${opts.apiKey}` } : {}) },
        body: JSON.stringify({ model: opts.model, messages, temperature: 0 }),
        signal: AbortSignal.any([signal, timeout]),
      });
    } catch (err) {
      throw new RetryLaterError(`code provider unreachable: ${(err as Error).message}`);
    }
    if (res.status === 429 || res.status >= 500) {
      const after = Number(res.headers.get('retry-after'));
      throw new RetryLaterError(`code provider answered ${res.status}`, Number.isFinite(after) && after > 0 ? after * 1000 : undefined);
    }
    if (!res.ok) throw new UnrecoverableError(`code provider refused the request (${res.status})`);
    const body = (await res.json()) as { choices?: { message?: { content?: string } }[] };
    const content = body.choices?.[0]?.message?.content;
    if (typeof content !== 'string' || !content.trim()) throw new RetryLaterError('code provider returned no content');
    return content;
  };

  return {
    name: `openai-compatible:${opts.model}`,
    async build(input, ctx): Promise<CodeEngineOutput> {
      let plan: string | null = null;
      if (input.planFirst) {
        await ctx.progress('planning', 'Asking the provider for a plan');
        plan = await call(
          [
            { role: 'system', content: 'You plan small single-page web apps. Answer in Markdown: goal, features, steps.' },
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
              input.framework === 'react' ? 'Use React 18 via React.createElement with no build step.' : 'Use plain JavaScript.'
            } Title: ${input.name}. Answer with the file in a single \`\`\`html block.`,
          },
          ...(plan ? [{ role: 'assistant', content: plan }] : []),
          { role: 'user', content: input.prompt },
        ],
        ctx.signal,
      );
      const m = /```html\s*([\s\S]*?)```/i.exec(answer);
      const html = (m?.[1] ?? answer).trim();
      if (!/<html[\s>]/i.test(html)) throw new UnrecoverableError('code provider did not return an HTML document');
      return { html: html + '\n', plan, summary: `App written by ${opts.model}.` };
    },
  };
}
