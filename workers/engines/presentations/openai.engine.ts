import { UnrecoverableError } from '../../pool/errors';
import { chatComplete } from '../openai-chat';
import type { DeckEngine } from './deck.engine';

/**
 * openai-compatible: asks an OpenAI-compatible chat-completions API (JSON mode) for the outline
 * as `{"slides":[{"title":…,"bullets":[…]}]}`. Items are returned unchecked; the deck pool marks
 * malformed ones as failed slides. 429 and 5xx are transient (retried); other 4xx are not.
 */
export function createOpenAiDeckEngine(opts: {
  baseUrl: string;
  apiKey?: string;
  model: string;
  timeoutMs?: number;
}): DeckEngine {
  return {
    name: `openai-compatible:${opts.model}`,
    async authorOutline(input, ctx) {
      await ctx.progress('outlining', `Asking the model for a ${input.slideCount}-slide outline`);
      const { content } = await chatComplete(
        { ...opts, label: 'deck provider' },
        [
          {
            role: 'system',
            content: `You outline presentation decks. Answer with JSON only: {"slides":[{"title":string,"bullets":[string]}]} with exactly ${input.slideCount} slides, the first a title slide, at most 5 short bullets each. Visual style: ${input.visualStyle}.`,
          },
          {
            role: 'user',
            content: `Deck: ${input.name}${input.companyName ? ` for ${input.companyName}` : ''}\n\nBrief:\n${input.brief}`,
          },
        ],
        { signal: ctx.signal, json: true },
      );
      let parsed: unknown;
      try {
        parsed = JSON.parse(content.replace(/^```(?:json)?\s*|```\s*$/g, ''));
      } catch {
        throw new UnrecoverableError('deck provider did not return a JSON outline');
      }
      const slides = (parsed as { slides?: unknown }).slides;
      if (!Array.isArray(slides) || slides.length === 0)
        throw new UnrecoverableError('deck provider returned no slides');
      return { items: slides.slice(0, 30), notes: [] };
    },
  };
}
