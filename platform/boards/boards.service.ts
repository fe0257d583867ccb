import {
  BOARD_LIMITS,
  DEFAULT_COLUMNS,
  type Board,
  type BoardColumnInput,
  type BoardCreate,
  type BoardDuplicate,
  type BoardUpdate,
  type Card,
  type CardCreate,
  type CardUpdate,
} from '../../contracts/boards';
import {
  type BoardsRepository,
  createBoardsRepository,
  isClosing,
  type BoardColumnDoc,
  type BoardDoc,
  type CardDoc,
} from './boards.repository';
import { freshKeys, keyBetween, PLACE_RETRIES } from './order';
import { AppError, clip, notFound } from '../infra/errors';
import { newId } from '../infra/ids';
import { mapPage } from '../infra/lists';
import { isDuplicateKey } from '../infra/mongo';
import { versionConflict } from '../infra/versioned';
import type { Runtime } from '../runtime';

export const BOARD_ID_PREFIX = 'brd';
export const CARD_ID_PREFIX = 'crd';

/** The absolute editor link of a board (SPEC 2.7 path shape /boards/{boardId}). */
export const boardUrl = (publicBaseUrl: string, boardId: string) => `${publicBaseUrl}/boards/${boardId}`;

export const toCard = (c: CardDoc): Card => ({
  id: c._id,
  boardId: c.boardId,
  title: c.title,
  body: c.body,
  column: c.column,
  position: c.position,
  labels: c.labels,
  assignee: c.assignee,
  dueDate: c.dueDate,
  projectIds: c.projectIds,
  version: c.version,
  createdAt: c.createdAt.toISOString(),
  updatedAt: c.updatedAt.toISOString(),
});

/** "In review" → "in-review"; never empty. */
const slug = (name: string) =>
  name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 48) || 'column';

/**
 * The lanes a create or PATCH asks for, with ids: a given id is kept; a lane without one gets a
 * slug of its name, never one of `taken` (the board's current lanes) nor of another listed lane.
 */
function resolveColumns(input: BoardColumnInput[], taken: Iterable<string> = []): BoardColumnDoc[] {
  const used = new Set<string>([...taken, ...input.flatMap((c) => (c.id ? [c.id] : []))]);
  return input.map((c) => {
    if (c.id) return { id: c.id, name: c.name };
    const root = slug(c.name);
    let id = root;
    for (let n = 2; used.has(id); n++) id = `${root}-${n}`;
    used.add(id);
    return { id, name: c.name };
  });
}

const unique = (xs: string[]) => [...new Set(xs)];
const placementConflict = (lane: string) =>
  new AppError(
    'conflict',
    `column: lane "${clip(lane)}" is being removed from the board; fetch the board and try again`,
  );

type Placement = { column?: string; before?: string | null; after?: string | null };
/** One account's boards and cards (the repository's forAccount). */
type Mine = ReturnType<BoardsRepository['forAccount']>;

/**
 * Boards and cards (SPEC 4.5). Card order: platform/boards/order.ts. Removing a lane that still
 * holds cards is refused (409 column_not_empty).
 *
 * Lane removal against concurrent card writes, without transactions: the PATCH first marks the
 * lanes it removes as closing on the board, then counts their cards, then stores the new lanes.
 * A card write into a lane stores the card first and then reads the board again; if the lane is
 * gone or closing, or the board is gone, it undoes itself. Either the count sees the card, or the
 * card's second read sees the mark: no card is left in a lane that no longer exists. Board
 * deletion works the same way (board first, then its cards; a card write that no longer finds
 * the board removes its card).
 * Length: a factory whose 19 operations share the boards repository and the board and card views; the
 * longest, place, is 57 lines.
 */
export function createBoardsService(rt: Pick<Runtime, 'store' | 'config'>) {
  const repo = createBoardsRepository(rt.store);
  const base = rt.config.PUBLIC_BASE_URL;

  const view = (b: BoardDoc, counts?: Map<string, number>): Board => {
    const columns = b.columns.map((c) =>
      counts ? { id: c.id, name: c.name, cardCount: counts.get(c.id) ?? 0 } : { id: c.id, name: c.name },
    );
    return {
      id: b._id,
      name: b.name,
      description: b.description,
      columns,
      tags: b.tags,
      ...(counts ? { cardCount: columns.reduce((n, c) => n + (c.cardCount ?? 0), 0) } : {}),
      version: b.version,
      openUrl: boardUrl(base, b._id),
      createdAt: b.createdAt.toISOString(),
      updatedAt: b.updatedAt.toISOString(),
    };
  };
  const viewWithCounts = async (mine: Mine, b: BoardDoc) => view(b, await mine.cardCounts(b._id));

  const mustBoard = async (mine: Mine, id: string) => {
    const b = await mine.getBoard(id);
    if (!b) throw notFound('board');
    return b;
  };
  const mustCard = async (mine: Mine, boardId: string, id: string) => {
    const c = await mine.getCard(boardId, id);
    if (!c) throw notFound('card');
    return c;
  };
  const hasLane = (b: BoardDoc, lane: string) => b.columns.some((c) => c.id === lane);

  /** 400 naming each linked id that is not a live project of the account (never saying why). */
  const checkProjects = async (mine: Mine, ids: string[] | undefined) => {
    if (!ids?.length) return;
    const missing = new Set(await mine.missingProjects(unique(ids)));
    const bad = ids.flatMap((id, i) => (missing.has(id) ? [`projectIds.${i}: names no project of yours`] : []));
    if (bad.length) throw new AppError('validation_error', bad.slice(0, 10).join('; '));
  };

  /**
   * Where a card goes: its lane and a fresh order key between the neighbours the request names.
   * `self` is the card being moved (left out of the neighbours); when it already sits in the
   * requested spot its key is kept.
   */
  async function place(
    mine: Mine,
    board: BoardDoc,
    want: Placement,
    self?: CardDoc,
  ): Promise<{ column: string; position: string }> {
    const neighbour = async (field: 'before' | 'after', id: string | null | undefined) => {
      if (!id) return null;
      if (self && id === self._id)
        throw new AppError('validation_error', `${field}: must name another card than the one moved`);
      const c = await mine.getCard(board._id, id);
      if (!c) throw new AppError('validation_error', `${field}: names no card of this board`);
      return c;
    };
    const [after, before] = await Promise.all([neighbour('after', want.after), neighbour('before', want.before)]);
    const column = want.column ?? after?.column ?? before?.column ?? self?.column ?? board.columns[0]!.id;
    if (!hasLane(board, column))
      throw new AppError('validation_error', `column: names no column of this board ("${clip(column)}")`);
    if (after && after.column !== column)
      throw new AppError('validation_error', `after: that card is in column "${after.column}", not "${clip(column)}"`);
    if (before && before.column !== column)
      throw new AppError(
        'validation_error',
        `before: that card is in column "${before.column}", not "${clip(column)}"`,
      );

    let prev: string | null;
    let next: string | null;
    const ex = self?._id;
    if (after && before) {
      if (!(after.position < before.position))
        throw new AppError('validation_error', 'before: must come after the card named by after in the lane');
      [prev, next] = [after.position, before.position];
    } else if (after) {
      prev = after.position;
      next = (await mine.firstAfter(board._id, column, prev, ex))?.position ?? null;
    } else if (before) {
      next = before.position;
      prev = (await mine.lastBefore(board._id, column, next, ex))?.position ?? null;
    } else if (want.after === null) {
      prev = null; // top of the lane
      next = (await mine.firstAfter(board._id, column, null, ex))?.position ?? null;
    } else {
      // Bottom of the lane (before: null, or only a lane given); a card that stays in its lane without a placement keeps its key.
      if (self && self.column === column && want.before === undefined) return { column, position: self.position };
      prev = (await mine.lastBefore(board._id, column, null, ex))?.position ?? null;
      next = null;
    }
    if (
      self &&
      self.column === column &&
      (prev === null || prev < self.position) &&
      (next === null || self.position < next)
    )
      return { column, position: self.position };
    return { column, position: keyBetween(prev, next) };
  }

  /** After a card write into `lane`: the board and lane must still be there (see the class comment). */
  const laneStillOpen = async (
    mine: Mine,
    boardId: string,
    lane: string,
  ): Promise<'ok' | 'board_gone' | 'lane_gone'> => {
    const b = await mine.getBoard(boardId);
    if (!b) return 'board_gone';
    return hasLane(b, lane) && !isClosing(b, lane) ? 'ok' : 'lane_gone';
  };

  /** Undo a move into a lane that is being removed: back to its old slot, or the bottom of its old lane when that slot was taken. */
  const putBack = async (mine: Mine, boardId: string, card: CardDoc, to: { column: string; position: string }) => {
    let target = to;
    for (let attempt = 0; attempt < PLACE_RETRIES; attempt++) {
      try {
        await mine.revertCard(boardId, card._id, { column: card.column, position: card.position }, target);
        return;
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
        const last = await mine.lastBefore(boardId, to.column, null, card._id);
        target = { column: to.column, position: keyBetween(last?.position ?? null, null) };
      }
    }
  };

  return {
    repository: repo,
    view,

    async list(accountId: string, q: { tag?: string; limit: number; cursor?: string }) {
      const page = await repo.forAccount(accountId).pageBoards(q);
      return mapPage(page, (b) => view(b));
    },

    async create(accountId: string, input: BoardCreate, idFor: (prefix: string) => string = newId) {
      const now = new Date();
      const doc: BoardDoc = {
        _id: idFor(BOARD_ID_PREFIX),
        accountId,
        name: input.name,
        description: input.description ?? '',
        columns: input.columns ? resolveColumns(input.columns) : DEFAULT_COLUMNS.map((c) => ({ ...c })),
        tags: unique(input.tags ?? []),
        version: 1,
        createdAt: now,
        updatedAt: now,
      };
      await repo.forAccount(accountId).insertBoard(doc);
      return view(doc, new Map());
    },

    async get(accountId: string, id: string) {
      const mine = repo.forAccount(accountId);
      return viewWithCounts(mine, await mustBoard(mine, id));
    },

    /**
     * PATCH: only the passed fields change. `columns` replaces the lanes (matched by id); a lane
     * left out must be empty (409 column_not_empty). With If-Match, 409 version_conflict when the
     * board moved on; without it, a lane change is re-applied on the board as it now is.
     */
    async update(accountId: string, id: string, patch: BoardUpdate, ifMatch?: number) {
      const set: Partial<Pick<BoardDoc, 'name' | 'description' | 'columns' | 'tags'>> = {};
      if (patch.name !== undefined) set.name = patch.name;
      if (patch.description !== undefined) set.description = patch.description;
      if (patch.tags !== undefined) set.tags = unique(patch.tags);
      const mine = repo.forAccount(accountId);
      if (patch.columns === undefined)
        return viewWithCounts(mine, await mine.updateBoard(id, set, { expectedVersion: ifMatch }));

      for (let attempt = 0; attempt < 8; attempt++) {
        const cur = await mustBoard(mine, id);
        if (ifMatch !== undefined && cur.version !== ifMatch) {
          throw versionConflict('board', cur.version, ifMatch);
        }
        set.columns = resolveColumns(
          patch.columns,
          cur.columns.map((c) => c.id),
        );
        const kept = new Set(set.columns.map((c) => c.id));
        const removed = cur.columns.map((c) => c.id).filter((c) => !kept.has(c));
        if (removed.length && !(await mine.markClosing(id, cur.version, removed))) continue; // it moved on: read it again
        try {
          if (removed.length && (await mine.countInColumns(id, removed)) > 0) {
            const counts = await mine.cardCounts(id);
            const full = removed.filter((c) => (counts.get(c) ?? 0) > 0).map((c) => `"${c}" (${counts.get(c)} cards)`);
            throw new AppError(
              'column_not_empty',
              `columns: lanes still holding cards cannot be removed: ${full.join(', ')}; move or delete their cards first`,
            );
          }
          const doc = await mine.updateBoard(id, set, {
            expectedVersion: cur.version,
            clearClosing: removed,
          });
          return viewWithCounts(mine, doc);
        } catch (err) {
          await mine.clearClosing(id, removed);
          if (err instanceof AppError && err.code === 'version_conflict' && ifMatch === undefined) continue;
          throw err;
        }
      }
      throw new AppError('conflict', 'the board kept changing while its lanes were updated; try again');
    },

    /** The board, then its cards (a card written meanwhile removes itself: see the class comment). */
    async remove(accountId: string, id: string) {
      const mine = repo.forAccount(accountId);
      if (!(await mine.deleteBoard(id))) throw notFound('board');
      await mine.deleteCardsOfBoard(id);
    },

    /**
     * A deep copy with new ids: the lanes (same ids and names) and every card (new crd_ ids,
     * same fields, same order with fresh keys). The cards are stored before the board, so a crash
     * half-way leaves no half-copied board visible.
     */
    async duplicate(accountId: string, id: string, input: BoardDuplicate, idFor: (prefix: string) => string = newId) {
      const mine = repo.forAccount(accountId);
      const src = await mustBoard(mine, id);
      const copyId = idFor(BOARD_ID_PREFIX);
      const now = new Date();
      const byLane = new Map<string, CardDoc[]>(src.columns.map((c) => [c.id, []]));
      for (const c of await mine.allCards(id)) byLane.get(c.column)?.push(c);
      const counts = new Map<string, number>();
      const copies: CardDoc[] = [];
      for (const [lane, cards] of byLane) {
        cards.sort((a, b) => (a.position < b.position ? -1 : a.position > b.position ? 1 : a._id < b._id ? -1 : 1));
        const keys = freshKeys(cards.length);
        for (const [i, c] of cards.entries())
          copies.push({
            ...c,
            _id: newId(CARD_ID_PREFIX),
            boardId: copyId,
            position: keys[i]!,
            version: 1,
            createdAt: now,
            updatedAt: now,
          });
        counts.set(lane, cards.length);
      }
      await mine.insertCards(copies);
      const name = input.name ?? `${src.name.slice(0, BOARD_LIMITS.nameMax - ' (copy)'.length)} (copy)`;
      const doc: BoardDoc = {
        _id: copyId,
        accountId,
        name,
        description: src.description,
        columns: src.columns.map((c) => ({ ...c })),
        tags: [...src.tags],
        version: 1,
        createdAt: now,
        updatedAt: now,
      };
      await mine.insertBoard(doc);
      return view(doc, counts);
    },

    // ---- cards -------------------------------------------------------------------------

    async listCards(
      accountId: string,
      boardId: string,
      q: { column?: string; label?: string; assignee?: string; limit: number; cursor?: string },
    ) {
      const mine = repo.forAccount(accountId);
      const board = await mustBoard(mine, boardId);
      if (q.column !== undefined && !hasLane(board, q.column))
        throw new AppError('validation_error', `column: names no column of this board ("${clip(q.column)}")`);
      const page = await mine.pageCards(board, q);
      return mapPage(page, toCard);
    },

    /** 201: at the bottom of its lane (default the first) unless before/after say where. */
    async createCard(accountId: string, boardId: string, input: CardCreate, idFor: (prefix: string) => string = newId) {
      const mine = repo.forAccount(accountId);
      let board = await mustBoard(mine, boardId);
      await checkProjects(mine, input.projectIds);
      const now = new Date();
      const doc: CardDoc = {
        _id: idFor(CARD_ID_PREFIX),
        accountId,
        boardId,
        title: input.title,
        body: input.body ?? '',
        column: '',
        position: '',
        labels: unique(input.labels ?? []),
        assignee: input.assignee ?? null,
        dueDate: input.dueDate ?? null,
        projectIds: unique(input.projectIds ?? []),
        version: 1,
        createdAt: now,
        updatedAt: now,
      };
      for (let attempt = 0; ; attempt++) {
        const slot = await place(mine, board, input);
        if (isClosing(board, slot.column)) throw placementConflict(slot.column);
        Object.assign(doc, slot);
        try {
          await mine.insertCard(doc);
          break;
        } catch (err) {
          if (!isDuplicateKey(err) || attempt >= PLACE_RETRIES)
            throw isDuplicateKey(err)
              ? new AppError('conflict', 'too many cards were placed in the same spot at once; try again')
              : err;
          board = await mustBoard(mine, boardId);
        }
      }
      const state = await laneStillOpen(mine, boardId, doc.column);
      if (state !== 'ok') {
        await mine.deleteCard(boardId, doc._id);
        throw state === 'board_gone' ? notFound('board') : placementConflict(doc.column);
      }
      return toCard(doc);
    },

    /**
     * PATCH: only the passed fields change; column/before/after move the card. One write of the
     * card, whatever changes (a lost slot is retried; other cards keep their keys).
     */
    async updateCard(accountId: string, boardId: string, cardId: string, patch: CardUpdate, ifMatch?: number) {
      const mine = repo.forAccount(accountId);
      let board = await mustBoard(mine, boardId);
      let card = await mustCard(mine, boardId, cardId);
      if (ifMatch !== undefined && card.version !== ifMatch) {
        throw versionConflict('card', card.version, ifMatch);
      }
      await checkProjects(mine, patch.projectIds);
      const set: Parameters<Mine['updateCard']>[2] = {};
      if (patch.title !== undefined) set.title = patch.title;
      if (patch.body !== undefined) set.body = patch.body;
      if (patch.labels !== undefined) set.labels = unique(patch.labels);
      if (patch.assignee !== undefined) set.assignee = patch.assignee;
      if (patch.dueDate !== undefined) set.dueDate = patch.dueDate;
      if (patch.projectIds !== undefined) set.projectIds = unique(patch.projectIds);
      const moving = patch.column !== undefined || patch.before !== undefined || patch.after !== undefined;
      const from = { column: card.column, position: card.position };
      let updated: CardDoc;
      for (let attempt = 0; ; attempt++) {
        if (moving) {
          const slot = await place(mine, board, patch, card);
          if (slot.column !== card.column && isClosing(board, slot.column)) throw placementConflict(slot.column);
          set.column = slot.column;
          set.position = slot.position;
        }
        try {
          updated = await mine.updateCard(boardId, cardId, set, ifMatch);
          break;
        } catch (err) {
          if (!isDuplicateKey(err) || attempt >= PLACE_RETRIES)
            throw isDuplicateKey(err)
              ? new AppError('conflict', 'too many cards were moved to the same spot at once; try again')
              : err;
          [board, card] = await Promise.all([mustBoard(mine, boardId), mustCard(mine, boardId, cardId)]);
        }
      }
      if (updated.column !== from.column) {
        const state = await laneStillOpen(mine, boardId, updated.column);
        if (state === 'board_gone') throw notFound('board');
        if (state === 'lane_gone') {
          await putBack(mine, boardId, updated, from);
          throw placementConflict(updated.column);
        }
      }
      return toCard(updated);
    },

    async deleteCard(accountId: string, boardId: string, cardId: string) {
      const mine = repo.forAccount(accountId);
      await mustBoard(mine, boardId);
      if (!(await mine.deleteCard(boardId, cardId))) throw notFound('card');
    },
  };
}
