import { RetryLaterError, UnrecoverableError } from '../pool/errors';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface ChatProviderOptions {
  baseUrl: string;
  apiKey?: string;
  model: string;
  timeoutMs?: number;
  /** Names the provider in errors, e.g. "code provider". */
  label: string;
}

/**
 * One call to an OpenAI-compatible chat-completions API (`POST {base}/chat/completions`, Bearer
 * key, temperature 0), shared by the code, research and deck adapters. Unreachable, 429 and 5xx
 * are transient (RetryLaterError, honouring Retry-After); other 4xx are not (UnrecoverableError);
 * an empty answer is transient. The provider URL is operator configuration, not user input, so it
 * does not pass the SSRF guard.
 */
export async function chatComplete(
  opts: ChatProviderOptions,
  messages: ChatMessage[],
  call: { signal: AbortSignal; json?: boolean },
): Promise<{ content: string; totalTokens: number | null }> {
  let res: Response;
  try {
    res = await fetch(`${opts.baseUrl.replace(/\/$/, '')}/chat/completions`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(opts.apiKey ? { authorization: `Bearer ${opts.apiKey}` } : {}),
      },
      body: JSON.stringify({
        model: opts.model,
        temperature: 0,
        messages,
        ...(call.json ? { response_format: { type: 'json_object' } } : {}),
      }),
      signal: AbortSignal.any([call.signal, AbortSignal.timeout(opts.timeoutMs ?? 120_000)]),
    });
  } catch (err) {
    throw new RetryLaterError(`${opts.label} unreachable: ${(err as Error).message}`);
  }
  if (res.status === 429 || res.status >= 500) {
    const after = Number(res.headers.get('retry-after'));
    throw new RetryLaterError(
      `${opts.label} answered ${res.status}`,
      Number.isFinite(after) && after > 0 ? after * 1000 : undefined,
    );
  }
  if (!res.ok) throw new UnrecoverableError(`${opts.label} refused the request (${res.status})`);
  const body = (await res.json()) as {
    choices?: { message?: { content?: string } }[];
    usage?: { total_tokens?: number };
  };
  const content = body.choices?.[0]?.message?.content;
  if (typeof content !== 'string' || !content.trim()) throw new RetryLaterError(`${opts.label} returned no content`);
  const used = body.usage?.total_tokens;
  return { content, totalTokens: typeof used === 'number' && Number.isInteger(used) ? used : null };
}
