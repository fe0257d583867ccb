import { expect } from 'chai';
import type { Client } from '../../scripts/harness/http';
import type { Stack } from '../../scripts/harness/stack';
import { COLLECTIONS } from '../../platform/infra/mongo';
import { newId } from '../../platform/infra/ids';

export const boardsCol = (stack: Stack) => stack.db.db.collection<any>(COLLECTIONS.boards);
export const cardsCol = (stack: Stack) => stack.db.db.collection<any>(COLLECTIONS.cards);

export async function createBoard(api: Client, body: Record<string, unknown> = {}) {
  const r = await api.post('/boards', { name: 'Sprint', ...body });
  expect(r.status, r.text).to.equal(201);
  return r.body;
}

export async function createCard(api: Client, boardId: string, body: Record<string, unknown> = {}) {
  const r = await api.post(`/boards/${boardId}/cards`, { title: 'Task', ...body });
  expect(r.status, r.text).to.equal(201);
  return r.body;
}

/** Every card of a board in list order, across pages. */
export async function allCards(api: Client, boardId: string, query = '', limit = 100): Promise<any[]> {
  const out: any[] = [];
  let cursor: string | undefined;
  do {
    const r = await api.get(
      `/boards/${boardId}/cards?limit=${limit}${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
    );
    expect(r.status, r.text).to.equal(200);
    out.push(...r.body.data);
    cursor = r.body.cursor ?? undefined;
  } while (cursor);
  return out;
}

/** Titles per lane, in list order. */
export const lanes = (cards: any[]) => {
  const out: Record<string, string[]> = {};
  for (const c of cards) {
    out[c.column] ??= [];
    out[c.column]!.push(c.title);
  }
  return out;
};

/** A live project of the account, stored the way the projects service stores one. */
export async function insertProject(stack: Stack, accountId: string) {
  const now = new Date();
  const id = newId('prj');
  await stack.db.db.collection<any>(COLLECTIONS.projects).insertOne({
    _id: id,
    accountId,
    name: 'Linked',
    description: '',
    kind: 'notes',
    projectType: 'notes',
    version: 1,
    content: { markdown: '' },
    shares: [],
    canvasMode: 'notes',
    tags: [],
    isStarred: false,
    createdAt: now,
    updatedAt: now,
    deletedAt: null,
  });
  return id;
}
