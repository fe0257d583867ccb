import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Stack } from '../../scripts/harness/stack';

/** The MCP endpoint of a test stack (outside /api/v1). */
export const mcpUrl = (stack: Stack) => new URL(`${stack.config.PUBLIC_BASE_URL}/mcp`);

/** The SDK's own client over Streamable HTTP, connected (initialize done) with `key` as Bearer. */
export async function mcpClient(stack: Stack, key?: string): Promise<Client> {
  const headers: Record<string, string> = key ? { Authorization: `Bearer ${key}` } : {};
  const transport = new StreamableHTTPClientTransport(mcpUrl(stack), { requestInit: { headers } });
  const client = new Client({ name: 'svc-tests', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

/** A tools/call, typed as the plain (non-task) result. */
export async function call(
  client: Client,
  name: string,
  args: Record<string, unknown> = {},
): Promise<CallToolResult & { structuredContent?: any }> {
  return (await client.callTool({ name, arguments: args })) as CallToolResult & { structuredContent?: any };
}

/** The text of a result's first content item. */
export const textOf = (r: CallToolResult) => (r.content[0] as { type: 'text'; text: string }).text;

/** A raw POST to /mcp with the headers a Streamable HTTP client sends. */
export async function rawPost(stack: Stack, body: string, headers: Record<string, string> = {}) {
  const res = await fetch(mcpUrl(stack), {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-06-18',
      ...headers,
    },
    body,
  });
  const text = await res.text();
  let json: any;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}
