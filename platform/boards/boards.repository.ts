import type { Collection, Filter } from 'mongodb';
import { AppError } from '../infra/errors';
import { decodeCursor, encodeCursor, keysetPage, type Page } from '../infra/lists';
import { COLLECTIONS, type Store, openStore } from '../infra/mongo';
import { accountSlice } from '../infra/tenant';
import { updateVersioned } from '../infra/versioned';

/**
 * Boards and their cards (SPEC 4.5). Boards hold their ordered lanes; cards live in their own
 * collection keyed by board, each at an order key (`position`) within its lane; see order.ts.
 * Every operation goes through `forAccount(accountId)`: another account's board or card is simply
 * not found.
 * WARNING: field names are persisted.
 */
export interface BoardColumnDoc {
  id: string;
  name: string;
}

export interface BoardDoc {
  _id: string; // brd_…
  accountId: string;
  name: string;
  description: string;
  /** Lanes in display order. */
  columns: BoardColumnDoc[];
  tags: string[];
  /** Optimistic concurrency (platform/infra/versioned.ts): 1 at creation, +1 per change of the board itself. */
  version: number;
  /**
   * Lanes a PATCH is removing, with when it started: card writes into them are undone while the
   * PATCH checks that they are empty (see the service). Entries older than CLOSING_STALE_MS are
   * leftovers of a process that died mid-PATCH and are ignored.
   */
  closing?: Record<string, Date>;
  createdAt: Date;
  updatedAt: Date;
}

export interface CardDoc {
  _id: string; // crd_…
  accountId: string;
  boardId: string;
  title: string;
  body: string;
  /** Lane id. */
  column: string;
  /** Fractional order key within the lane, unique per (board, lane): see order.ts. */
  position: string;
  labels: string[];
  assignee: string | null;
  /** YYYY-MM-DD. */
  dueDate: string | null;
  projectIds: string[];
  version: number;
  createdAt: Date;
  updatedAt: Date;
}

/** A `closing` mark older than this is a leftover and ignored. */
export const CLOSING_STALE_MS = 30_000;

export const isClosing = (b: Pick<BoardDoc, 'closing'>, column: string, now = Date.now()) => {
  const at = b.closing?.[column];
  return at instanceof Date && now - at.getTime() < CLOSING_STALE_MS;
};

const CARD_SORT = { position: 1, _id: 1 } as const;
/** Cards copied per insertMany when a board is duplicated. */
const COPY_BATCH = 500;

/** What a card's link to a project is checked against (the projects repository owns the shape). */
interface ProjectRef {
  _id: string;
  accountId: string;
  deletedAt?: Date | null;
}

// Length: almost all of it is forAccount (its own Length line), the account-bound queries; the factory adds
// the index set-up.
export function createBoardsRepository(store: Store) {
  const db = openStore(store);
  const boards = db.db.collection<BoardDoc>(COLLECTIONS.boards) as unknown as Collection<BoardDoc>;
  const cards = db.db.collection<CardDoc>(COLLECTIONS.cards) as unknown as Collection<CardDoc>;
  const projects = db.db.collection<ProjectRef>(COLLECTIONS.projects);

  // The unique (board, lane, position) index is what keeps order keys unique under concurrent
  // moves, so card writes wait for it; a failure is not swallowed (the next write tries again).
  let indexed: Promise<unknown> | undefined;
  const ensureIndexes = () =>
    (indexed ??= Promise.all([
      cards.createIndex({ boardId: 1, column: 1, position: 1 }, { unique: true, name: 'board_lane_position_unique' }),
      cards.createIndex({ accountId: 1, boardId: 1 }),
      boards.createIndex({ accountId: 1, updatedAt: -1 }),
    ]).catch((err) => {
      indexed = undefined;
      throw err;
    }));

  return {
    ensureIndexes,

    // Length: 23 queries bound to one account id (the tenant filter lives in their slices); the longest,
    // pageCards, is 53 lines.
    forAccount(accountId: string) {
      const myBoards = accountSlice(boards, accountId);
      const myCards = accountSlice(cards, accountId);
      const myProjects = accountSlice(projects, accountId);
      const boardFilter = (id: string) => ({ _id: id }) as Filter<BoardDoc>;

      return {
        // ---- boards --------------------------------------------------------------------

        async insertBoard(doc: Omit<BoardDoc, 'accountId'>): Promise<BoardDoc> {
          await ensureIndexes();
          await myBoards.insertOne(doc as BoardDoc);
          return { ...doc, accountId };
        },

        getBoard: (id: string) => myBoards.findOne(boardFilter(id)),

        pageBoards(q: { tag?: string; limit: number; cursor?: string }): Promise<Page<BoardDoc>> {
          const filter: Filter<BoardDoc> = q.tag !== undefined ? { tags: q.tag } : {};
          return keysetPage(myBoards, filter, {
            tag: 'boards:updatedAt:desc',
            field: 'updatedAt',
            direction: -1,
            limit: q.limit,
            cursor: q.cursor,
          });
        },

        /** $set `set` (+ version, updatedAt) and drop the `closing` marks of `clearClosing`; 404 / 409 version_conflict. */
        updateBoard(
          id: string,
          set: Partial<Pick<BoardDoc, 'name' | 'description' | 'columns' | 'tags'>>,
          opts: { expectedVersion?: number; clearClosing?: string[] } = {},
        ) {
          const unset: Record<string, ''> = Object.fromEntries(
            (opts.clearClosing ?? []).map((c) => [`closing.${c}`, '' as const]),
          );
          return updateVersioned(
            myBoards,
            accountId,
            id,
            { $set: set, ...(Object.keys(unset).length ? { $unset: unset } : {}) },
            { expectedVersion: opts.expectedVersion, what: 'board' },
          );
        },

        /** Mark lanes as being removed, only while the board is still at `version`. False when it moved on (or is gone). */
        async markClosing(id: string, version: number, columns: string[], at = new Date()): Promise<boolean> {
          const set = Object.fromEntries(columns.map((c) => [`closing.${c}`, at]));
          const r = await myBoards.updateOne({ _id: id, version } as Filter<BoardDoc>, { $set: set });
          return r.matchedCount === 1;
        },

        async clearClosing(id: string, columns: string[]): Promise<void> {
          if (!columns.length) return;
          await myBoards.updateOne(boardFilter(id), {
            $unset: Object.fromEntries(columns.map((c) => [`closing.${c}`, '' as const])) as Record<string, ''>,
          });
        },

        async deleteBoard(id: string): Promise<boolean> {
          return (await myBoards.deleteOne(boardFilter(id))).deletedCount === 1;
        },

        // ---- cards ---------------------------------------------------------------------

        /** Cards per lane id (lanes without cards are absent). */
        async cardCounts(boardId: string): Promise<Map<string, number>> {
          const rows = await myCards
            .aggregate<{ _id: string; n: number }>([
              { $match: { boardId } },
              { $group: { _id: '$column', n: { $sum: 1 } } },
            ])
            .toArray();
          return new Map(rows.map((r) => [r._id, r.n]));
        },

        /** Cards in any of `columns`. */
        countInColumns: (boardId: string, columns: string[]) =>
          myCards.countDocuments({ boardId, column: { $in: columns } }),

        getCard: (boardId: string, id: string) => myCards.findOne({ _id: id, boardId }),

        /** The first card of a lane with a position above `above` (or the first of all), leaving out `exclude`. */
        firstAfter(boardId: string, column: string, above: string | null, exclude?: string) {
          const f: Filter<CardDoc> = {
            boardId,
            column,
            ...(above !== null ? { position: { $gt: above } } : {}),
            ...(exclude ? { _id: { $ne: exclude } } : {}),
          };
          return myCards
            .find(f, { projection: { position: 1 } })
            .sort(CARD_SORT)
            .limit(1)
            .next();
        },

        /** The last card of a lane with a position below `below` (or the last of all), leaving out `exclude`. */
        lastBefore(boardId: string, column: string, below: string | null, exclude?: string) {
          const f: Filter<CardDoc> = {
            boardId,
            column,
            ...(below !== null ? { position: { $lt: below } } : {}),
            ...(exclude ? { _id: { $ne: exclude } } : {}),
          };
          return myCards
            .find(f, { projection: { position: 1 } })
            .sort({ position: -1, _id: -1 })
            .limit(1)
            .next();
        },

        /** Insert a card; a taken position throws a duplicate-key error (isDuplicateKey in platform/infra/mongo.ts). */
        async insertCard(doc: Omit<CardDoc, 'accountId'>): Promise<CardDoc> {
          await ensureIndexes();
          await myCards.insertOne(doc as CardDoc);
          return { ...doc, accountId };
        },

        /** One write of the card's passed fields (a move included); 404 / 409 version_conflict; a taken position throws a duplicate-key error. */
        async updateCard(
          boardId: string,
          id: string,
          set: Partial<Omit<CardDoc, '_id' | 'accountId' | 'boardId' | 'version' | 'createdAt' | 'updatedAt'>>,
          expectedVersion?: number,
        ) {
          await ensureIndexes();
          return updateVersioned(
            myCards,
            accountId,
            id,
            { $set: set },
            { expectedVersion, extra: { boardId }, what: 'card' },
          );
        },

        /** Put a card back where it was (undoing a move into a lane being removed), if it is still where the move put it. */
        async revertCard(
          boardId: string,
          id: string,
          from: { column: string; position: string },
          to: { column: string; position: string },
        ): Promise<boolean> {
          const r = await myCards.updateOne(
            { _id: id, boardId, column: from.column, position: from.position },
            { $set: { column: to.column, position: to.position, updatedAt: new Date() }, $inc: { version: 1 } },
          );
          return r.matchedCount === 1;
        },

        async deleteCard(boardId: string, id: string): Promise<boolean> {
          return (await myCards.deleteOne({ _id: id, boardId })).deletedCount === 1;
        },

        async deleteCardsOfBoard(boardId: string): Promise<number> {
          return (await myCards.deleteMany({ boardId })).deletedCount;
        },

        /** Every card of a board, lane by lane in position order (for duplication). */
        allCards: (boardId: string) =>
          myCards
            .find({ boardId })
            .sort({ column: 1, ...CARD_SORT })
            .toArray(),

        async insertCards(docs: Omit<CardDoc, 'accountId'>[]): Promise<void> {
          await ensureIndexes();
          for (let i = 0; i < docs.length; i += COPY_BATCH)
            await myCards.insertMany(docs.slice(i, i + COPY_BATCH) as CardDoc[], { ordered: true });
        },

        /**
         * A page of a board's cards in board order: lane by lane as the board lists them, then by
         * position, then id. The cursor holds the last card's (lane, position, id), so cards added,
         * moved or deleted elsewhere never shift the pages still to read. One query per lane visited.
         */
        async pageCards(
          board: Pick<BoardDoc, '_id' | 'columns'>,
          q: { column?: string; label?: string; assignee?: string; limit: number; cursor?: string },
        ): Promise<Page<CardDoc>> {
          const tag = `cards:${board._id}`;
          const lanes = q.column !== undefined ? [q.column] : board.columns.map((c) => c.id);
          const base: Filter<CardDoc> = {
            boardId: board._id,
            ...(q.label !== undefined ? { labels: q.label } : {}),
            ...(q.assignee !== undefined ? { assignee: q.assignee } : {}),
          };
          let start = 0;
          let after: { position: string; id: string } | undefined;
          if (q.cursor) {
            const c = decodeCursor(tag, q.cursor);
            const [lane, position] = typeof c.value === 'string' ? c.value.split(' ') : [];
            start = lanes.indexOf(lane ?? '');
            if (start < 0 || !position)
              throw new AppError(
                'validation_error',
                'cursor: its lane is no longer on this board (or is filtered out); start again without a cursor',
              );
            after = { position, id: c.id };
          }
          const rows: CardDoc[] = [];
          for (let i = start; i < lanes.length && rows.length <= q.limit; i++) {
            const lane = lanes[i]!;
            const f: Filter<CardDoc> =
              i === start && after
                ? {
                    ...base,
                    column: lane,
                    $or: [{ position: { $gt: after.position } }, { position: after.position, _id: { $gt: after.id } }],
                  }
                : { ...base, column: lane };
            rows.push(
              ...(await myCards
                .find(f)
                .sort(CARD_SORT)
                .limit(q.limit + 1 - rows.length)
                .toArray()),
            );
          }
          const total = await myCards.countDocuments({ ...base, column: { $in: lanes } });
          const more = rows.length > q.limit;
          const data = rows.slice(0, q.limit);
          const last = data[data.length - 1];
          return {
            data,
            total,
            cursor: more && last ? encodeCursor(tag, `${last.column} ${last.position}`, last._id) : null,
          };
        },

        /** Which of `ids` are not live projects of the account (one lookup by id each). */
        async missingProjects(ids: string[]): Promise<string[]> {
          const found = await Promise.all(
            ids.map((id) =>
              myProjects.findOne({ _id: id, deletedAt: null } as Filter<ProjectRef>, { projection: { _id: 1 } }),
            ),
          );
          return ids.filter((_, i) => !found[i]);
        },
      };
    },
  };
}
export type BoardsRepository = ReturnType<typeof createBoardsRepository>;
