import { DefaultChatTransport, readUIMessageStream, type UIMessage, type UIMessageChunk } from 'ai';

export interface StreamedTurn {
  status: number;
  headers: Headers;
  /** Every chunk, as the ai package parsed it (strictly: an unknown member fails the read). */
  chunks: UIMessageChunk[];
  /** The assistant message readUIMessageStream assembled. */
  message: UIMessage<{
    conversationId?: string;
    mode?: string;
    usage?: { inputTokens: number | null; outputTokens: number | null };
  }>;
  /** The bytes on the wire. */
  raw: string;
  /** `: …` comment lines seen (keepalives). */
  comments: number;
}

/**
 * POST /chat the way a browser on the AI SDK v5 does: DefaultChatTransport (the transport of
 * useChat) posts and parses the SSE with the package's own parser and its strict chunk schema,
 * readUIMessageStream assembles the message. The body is ours (prepareSendMessagesRequest), the
 * raw bytes are kept for the wire checks.
 */
export async function streamChat(
  baseUrl: string,
  key: string,
  body: Record<string, unknown>,
  opts: { signal?: AbortSignal; onChunk?: (c: UIMessageChunk, raw: string) => void } = {},
): Promise<StreamedTurn> {
  let status = 0;
  let headers = new Headers();
  let rawP: Promise<string> = Promise.resolve('');
  let rawSoFar = '';
  const transport = new DefaultChatTransport<UIMessage>({
    api: `${baseUrl}/chat`,
    headers: { authorization: `Bearer ${key}` },
    prepareSendMessagesRequest: () => ({ body }),
    fetch: (async (input: string | URL | Request, init?: RequestInit) => {
      const res = await fetch(input, init);
      status = res.status;
      headers = res.headers;
      if (!res.body) return res;
      const [a, b] = res.body.tee();
      rawP = (async () => {
        const dec = new TextDecoder();
        const reader = a.getReader();
        try {
          for (;;) {
            const { done, value } = await reader.read();
            if (done) break;
            rawSoFar += dec.decode(value, { stream: true });
          }
        } catch {
          // aborted by the test
        }
        return rawSoFar;
      })();
      return new Response(b, { status: res.status, headers: res.headers });
    }) as typeof fetch,
  });
  const stream = await transport.sendMessages({
    chatId: 'c',
    messages: [],
    trigger: 'submit-message',
    messageId: undefined,
    abortSignal: opts.signal,
  });
  const [forChunks, forMessage] = stream.tee();
  const chunks: UIMessageChunk[] = [];
  const chunksDone = (async () => {
    const reader = forChunks.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      opts.onChunk?.(value, rawSoFar);
    }
  })();
  let message: StreamedTurn['message'] | undefined;
  for await (const m of readUIMessageStream<StreamedTurn['message']>({ stream: forMessage })) message = m;
  await chunksDone;
  const raw = await rawP;
  return {
    status,
    headers,
    chunks,
    message: message!,
    raw,
    comments: raw.split('\n').filter((l) => l.startsWith(':')).length,
  };
}

/** The SSE frames of a raw body: every frame is one `data:` line or one comment, never `event:`. */
export function frames(raw: string): string[] {
  return raw.split('\n\n').filter((f) => f !== '');
}
