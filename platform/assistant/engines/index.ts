import type { Config } from '../../infra/config';
import type { ChatEngine } from '../engine';
import { createLocalEngine } from './local';
import { createOpenAIEngine } from './openai';

export { createLocalEngine } from './local';

/**
 * The engine CHAT_ENGINE names: `local` (the offline planner) or `openai` (any OpenAI-compatible
 * chat-completions provider at OPENAI_BASE_URL with OPENAI_API_KEY, model CHAT_MODEL, default
 * OPENAI_MODEL; each step limited to CHAT_TIMEOUT_MS). `fetch` is for tests.
 */
export function createChatEngine(config: Config, opts: { fetch?: typeof fetch } = {}): ChatEngine {
  if (config.CHAT_ENGINE === 'openai') {
    return createOpenAIEngine({
      baseUrl: config.OPENAI_BASE_URL,
      apiKey: config.OPENAI_API_KEY,
      model: config.CHAT_MODEL ?? config.OPENAI_MODEL,
      timeoutMs: config.CHAT_TIMEOUT_MS,
      fetch: opts.fetch,
    });
  }
  return createLocalEngine({ publicBaseUrl: config.PUBLIC_BASE_URL });
}
