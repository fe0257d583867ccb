import { expect } from 'chai';
import type { Client } from '../../scripts/harness/http';

/** A small flowchart body; `extra` overrides. */
export const flowchartBody = (extra: Record<string, unknown> = {}) => ({
  name: 'Deploy',
  description: 'How we ship',
  tags: ['eng'],
  nodes: [
    { id: 'start', label: 'Start', shape: 'start' },
    { id: 'build', label: 'Build' },
    { id: 'ok', label: 'Tests pass?', shape: 'decision' },
    { id: 'ship', label: 'Ship' },
    { id: 'fix', label: 'Fix' },
    { id: 'end', label: 'Done', shape: 'end' },
  ],
  edges: [
    { from: 'start', to: 'build' },
    { from: 'build', to: 'ok' },
    { from: 'ok', to: 'ship', label: 'yes' },
    { from: 'ok', to: 'fix', label: 'no' },
    { from: 'fix', to: 'build' },
    { from: 'ship', to: 'end' },
  ],
  ...extra,
});

export const whiteboardBody = (extra: Record<string, unknown> = {}) => ({
  name: 'Board',
  elements: [
    { id: 'a', type: 'shape', shape: 'rectangle', text: 'A', x: 0, y: 0 },
    { id: 'b', type: 'text', text: 'hello', x: 400, y: 200, width: 100, height: 40, style: { fontSize: 20 } },
    {
      id: 'img',
      type: 'image',
      url: 'https://example.com/cat.png',
      alt: 'a cat',
      x: 0,
      y: 300,
      width: 200,
      height: 100,
    },
    { id: 'c', type: 'connector', from: 'a', to: 'b', label: 'to' },
  ],
  ...extra,
});

/** POST a body, expect 201, return the project. */
export async function make(
  api: Client,
  path: '/flowcharts' | '/whiteboards' | '/notes',
  body: Record<string, unknown>,
) {
  const r = await api.post(path, body);
  expect(r.status, r.text).to.equal(201);
  return r.body;
}

/** Every page of GET /projects with `query`, following cursors. */
export async function allPages(api: Client, query = '') {
  const out: any[] = [];
  let cursor: string | undefined;
  do {
    const r = await api.get(`/projects?limit=100${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    expect(r.status, r.text).to.equal(200);
    out.push(...r.body.data);
    cursor = r.body.cursor ?? undefined;
  } while (cursor);
  return out;
}

/** Expect a 400 validation_error whose message names `field`. */
export function expect400(r: { status: number; body: any; text: string }, field: string) {
  expect(r.status, r.text).to.equal(400);
  expect(r.body.error.code).to.equal('validation_error');
  expect(r.body.error.message).to.include(field);
}
