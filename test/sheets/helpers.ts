import { client, type Client } from '../../scripts/harness/http';
import type { Stack } from '../../scripts/harness/stack';

export const COLUMNS = [
  { name: 'Item', type: 'string' },
  { name: 'Price', type: 'number' },
  { name: 'Qty', type: 'number' },
  { name: 'Date', type: 'date' },
  { name: 'Status', type: 'string' },
];

export const ROWS = [
  ['Apple', 1.1, 3, '2024-03-01', 'open'],
  ['Pear', 2, 5, '2024-01-15', 'done'],
  ['Plum', 0.5, 10, '2024-02-10', 'open'],
  ['Fig', 3, null, '2024-04-20', 'done'],
];

export async function account(stack: Stack, opts: { scopes?: ('read' | 'write' | 'ai')[]; credits?: number } = {}) {
  const a = await stack.createAccount({ scopes: opts.scopes, credits: opts.credits });
  return { ...a, api: client(stack.baseUrl, a.key) as Client };
}

export async function newSheet(api: Client, body: Record<string, unknown> = {}) {
  const r = await api.post('/sheets', { name: 'Fruit', columns: COLUMNS, rows: ROWS, ...body });
  if (r.status !== 201) throw new Error(`create failed: ${r.status} ${r.text}`);
  return r.body;
}
