import type http from 'node:http';
import { deflateSync } from 'node:zlib';
import { fakeServer, type Recorded } from '../helpers/fake-provider';

/** What the fake provider answers to one POST /chat/completions. */
export type ChatReply =
  | {
      text?: string;
      toolCalls?: { name: string; args: unknown }[];
      /** Ids call_0, call_1, … in every answer (as some providers do), rather than unique ones. */
      reuseIds?: boolean;
      /** Cut the connection after the calls' first chunks (names and the start of their arguments). */
      cutAfterCallStart?: boolean;
    }
  /** An HTTP error before any byte of the stream. */
  | { status: number; body?: string }
  /** Some text, then the connection is cut mid-stream. */
  | { text: string; cut: true };

/** A 2x2 RGB PNG (what the images endpoint answers). */
export function tinyPng(): Buffer {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (b: Buffer) => {
    let c = 0xffffffff;
    for (const x of b) c = crcTable[(c ^ x) & 0xff]! ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type: string, data: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const td = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const c = Buffer.alloc(4);
    c.writeUInt32BE(crc(td));
    return Buffer.concat([len, td, c]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(2, 0);
  ihdr.writeUInt32BE(2, 4);
  ihdr[8] = 8;
  ihdr[9] = 2;
  const raw = Buffer.from([0, 255, 0, 0, 0, 255, 0, 0, 0, 0, 255, 255, 255, 255]);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

const sse = (res: http.ServerResponse, obj: unknown) => res.write(`data: ${JSON.stringify(obj)}\n\n`);

/**
 * A local stand-in for an OpenAI-compatible provider: POST /chat/completions streams real
 * chat.completion.chunk SSE (tool-call arguments split across chunks, usage in the last chunk)
 * from a script the test sets per request; POST /images/generations answers a PNG, and can be
 * held (`holdImages`) so that a tool "works" while the test watches the chat stream.
 */
export async function fakeOpenAi() {
  let script: (
    body: { messages: { role: string; content?: unknown }[]; tools?: { function: { name: string } }[] },
    n: number,
  ) => ChatReply = () => ({ text: 'Hello.' });
  let chatCalls = 0;
  let imageGate: Promise<void> | null = null;
  let releaseImages = () => {};
  let imageArrived = () => {};
  let imageRequested = new Promise<void>((r) => (imageArrived = r));

  const server = await fakeServer(async (req: Recorded, res) => {
    if (req.url.endsWith('/images/generations')) {
      imageArrived();
      if (imageGate !== null) await imageGate;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ created: 1, data: [{ b64_json: tinyPng().toString('base64') }] }));
      return;
    }
    if (!req.url.endsWith('/chat/completions')) {
      res.statusCode = 404;
      res.end('{"error":{"message":"no such route"}}');
      return;
    }
    const reply = script(JSON.parse(req.body), chatCalls++);
    if ('status' in reply) {
      res.statusCode = reply.status;
      res.setHeader('content-type', 'application/json');
      res.end(
        reply.body ??
          JSON.stringify({
            error: { message: 'The server had an error while processing your request.', type: 'server_error' },
          }),
      );
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const base = {
      id: `chatcmpl-${chatCalls}`,
      object: 'chat.completion.chunk',
      created: 1_700_000_000,
      model: 'fake-chat-1',
    };
    sse(res, { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] });
    if (reply.text) {
      // Two pieces: the client must join deltas.
      const half = Math.ceil(reply.text.length / 2);
      for (const piece of [reply.text.slice(0, half), reply.text.slice(half)])
        if (piece) sse(res, { ...base, choices: [{ index: 0, delta: { content: piece }, finish_reason: null }] });
    }
    if ('cut' in reply) {
      await new Promise((r) => setTimeout(r, 20));
      res.socket?.destroy();
      return;
    }
    const calls = reply.toolCalls ?? [];
    const idOf = (index: number) => (reply.reuseIds ? `call_${index}` : `call_${chatCalls}_${index}`);
    if (reply.cutAfterCallStart) {
      calls.forEach((c, index) => {
        sse(res, {
          ...base,
          choices: [
            {
              index: 0,
              delta: {
                tool_calls: [{ index, id: idOf(index), type: 'function', function: { name: c.name, arguments: '' } }],
              },
              finish_reason: null,
            },
          ],
        });
        sse(res, {
          ...base,
          choices: [
            {
              index: 0,
              delta: { tool_calls: [{ index, function: { arguments: JSON.stringify(c.args).slice(0, 3) } }] },
              finish_reason: null,
            },
          ],
        });
      });
      await new Promise((r) => setTimeout(r, 20));
      res.socket?.destroy();
      return;
    }
    calls.forEach((c, index) => {
      const args = JSON.stringify(c.args);
      const third = Math.ceil(args.length / 3);
      sse(res, {
        ...base,
        choices: [
          {
            index: 0,
            delta: {
              tool_calls: [{ index, id: idOf(index), type: 'function', function: { name: c.name, arguments: '' } }],
            },
            finish_reason: null,
          },
        ],
      });
      for (let i = 0; i < args.length; i += third)
        sse(res, {
          ...base,
          choices: [
            {
              index: 0,
              delta: { tool_calls: [{ index, function: { arguments: args.slice(i, i + third) } }] },
              finish_reason: null,
            },
          ],
        });
    });
    sse(res, { ...base, choices: [{ index: 0, delta: {}, finish_reason: calls.length ? 'tool_calls' : 'stop' }] });
    sse(res, { ...base, choices: [], usage: { prompt_tokens: 42, completion_tokens: 7, total_tokens: 49 } });
    res.end('data: [DONE]\n\n');
  });

  return {
    url: `${server.url}/v1`,
    requests: server.requests,
    get chatCalls() {
      return chatCalls;
    },
    script(fn: typeof script) {
      script = fn;
      chatCalls = 0;
    },
    /** Hold every image render until releaseImages(); `imageRequested` resolves when one arrives. */
    holdImages() {
      imageGate = new Promise<void>((r) => (releaseImages = r));
      imageRequested = new Promise<void>((r) => (imageArrived = r));
    },
    get imageRequested() {
      return imageRequested;
    },
    releaseImages() {
      imageGate = null;
      releaseImages();
    },
    close: server.close,
  };
}
