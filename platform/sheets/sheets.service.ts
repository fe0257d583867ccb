import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import {
  ColumnDef,
  columnLetter,
  SHEET_EDIT_SAMPLE_ROWS,
  SHEET_LIMITS,
  SheetOps,
  type Cell,
  type ColumnType,
  type SheetOp,
  type SheetRpcReply,
  type SheetRpcRequest,
} from '../../contracts/sheets';
import { openUrlOf } from '../../contracts/projects';
import { AppError, clip } from '../infra/errors';
import { newId } from '../infra/ids';
import { mapPage } from '../infra/lists';
import { COLLECTIONS } from '../infra/mongo';
import type { Runtime } from '../runtime';
import { a1, CellError, checkCell, parseRange } from './cells';
import { emptyTree, GridLimitError, sameTree, WorkingGrid, type NewBlock, type Tree } from './grid';
import {
  applyOps,
  conflictOf,
  describeOps,
  OpErrorAt,
  reapplyOps,
  type Applied,
  type DiffView,
  type ROp,
  type Touched,
} from './ops';
import {
  createSheetsRepository,
  mergedSlot,
  proposalSlot,
  type CommitDoc,
  type SheetHeadDoc,
  type SheetProjectRow,
} from './sheets.repository';
import { versionConflict } from '../infra/versioned';
import { fromUnits } from '../credits/credits';
import { paidCall } from '../credits/paid-call';
import { createProjectsService } from '../projects/projects.service';

export interface CreateSheetInput {
  accountId: string;
  name: string;
  description?: string;
  tags?: string[];
  columns: { name: string; type: ColumnType }[];
  rows: unknown[][];
  idFor?: (prefix: string) => string;
  /** The API key id that creates it (the creation commit's author); null for the service itself. */
  authorKeyId?: string | null;
}

/** Who is asking: the account, and the key (commit author). */
export interface Caller {
  accountId: string;
  keyId: string | null;
}

/** Tries of a merge that lost its race to concurrent merges before answering 409 conflict. */
export const MERGE_TRIES = 12;

const columnsView = (tree: Tree) =>
  tree.columns.map((c, i) => ({ letter: columnLetter(i), name: c.name, type: c.type }));

const validation = (message: string) => new AppError('validation_error', message);

/** Sheets (SPEC 4.4): create, read, apply and propose ops, resolve, roll back, edit by instruction. */
// Length: a factory whose 34 functions (the operations and their helpers gridOf, mustHead, diffTrees …) share
// the projects service, the sheets repository and the public base URL; each is a function of its own, the
// longest (create) 102 lines.
export function createSheetsService(rt: Pick<Runtime, 'store' | 'config' | 'amqp' | 'log' | 'credits'>) {
  const projects = createProjectsService(rt);
  const repo = createSheetsRepository(rt.store);
  const base = rt.config.PUBLIC_BASE_URL;

  const gridOf = (accountId: string, sheetId: string, tree: Tree) =>
    new WorkingGrid(tree, (ids) => repo.forAccount(accountId).blocks(sheetId, ids));

  const mustHead = async (accountId: string, id: string): Promise<SheetHeadDoc> => {
    const head = await repo.forAccount(accountId).head(id);
    if (!head) throw new AppError('not_found', 'sheet not found');
    return head;
  };

  const mustProject = async (accountId: string, id: string): Promise<SheetProjectRow> => {
    const p = await projects.repository.forAccount(accountId).get(id);
    if (!p) throw new AppError('not_found', 'sheet not found');
    return p;
  };

  const summaryView = (head: SheetHeadDoc, p: SheetProjectRow) => ({
    id: head._id,
    name: p.name,
    description: p.description,
    tags: p.tags,
    openUrl: openUrlOf(base, 'sheet', head._id),
    columns: columnsView(head.tree),
    rowCount: head.tree.rowCount,
    columnCount: head.tree.columns.length,
    version: head.version,
    headCommitId: head.headCommitId,
    createdAt: head.createdAt.toISOString(),
    updatedAt: new Date(Math.max(head.updatedAt.getTime(), p.updatedAt.getTime())).toISOString(),
  });

  const sheetView = async (head: SheetHeadDoc, p: SheetProjectRow, startRow: number, rowLimit: number) => {
    const grid = gridOf(head.accountId, head._id, head.tree);
    const start = Math.min(startRow - 1, grid.rowCount);
    const end = Math.min(start + rowLimit, grid.rowCount);
    await grid.ensure(start, end);
    return {
      ...summaryView(head, p),
      startRow: start + 1,
      rows: grid.slice(start, end).map((r) => r.v),
      nextStartRow: end < grid.rowCount ? end + 1 : null,
    };
  };

  const commitSummary = (c: CommitDoc) => ({
    id: c._id,
    sheetId: c.sheetId,
    status: c.status,
    seq: c.seq,
    parentId: c.parentId,
    baseCommitId: c.baseCommitId,
    summary: c.summary,
    source: c.source,
    author: { keyId: c.authorKeyId },
    resolvedBy: c.resolvedAt ? { keyId: c.resolvedByKeyId } : null,
    rebased: c.rebased,
    rollbackOf: c.rollbackOf,
    changedCells: c.changedCells,
    createdAt: c.createdAt.toISOString(),
    resolvedAt: c.resolvedAt?.toISOString() ?? null,
  });
  const commitView = (c: CommitDoc) => ({
    ...commitSummary(c),
    ops: JSON.parse(c.ops) as Record<string, unknown>[],
    diff: JSON.parse(c.diff) as DiffView,
  });
  const changeView = (c: CommitDoc, tree: Tree, version: number) => ({
    commit: commitView(c),
    version,
    rowCount: tree.rowCount,
    columns: columnsView(tree),
  });

  /** A merged commit whose writer died before moving the head: move the head onto it. */
  const rollForward = async (caller: Caller, sheetId: string, head: SheetHeadDoc) => {
    const r = repo.forAccount(caller.accountId);
    const next = await r.commitAt(sheetId, head.version + 1);
    if (next?.tree && next.seq)
      await r.moveHead(sheetId, head.version, {
        version: next.seq,
        headCommitId: next._id,
        tree: next.tree,
        updatedAt: next.resolvedAt ?? next.createdAt,
      });
  };

  /** Back off a little after a lost race, more on each try, with jitter. */
  const backoff = (attempt: number) => sleep(Math.floor(Math.random() * 5 * Math.min(attempt, 6)) + 1);

  const finalize = async (grid: WorkingGrid, field: string) => {
    try {
      return await grid.finalize();
    } catch (err) {
      if (err instanceof GridLimitError) throw validation(`${field}: ${err.message}`);
      throw err;
    }
  };

  const newCommit = (
    caller: Caller,
    sheetId: string,
    head: SheetHeadDoc,
    fields: {
      status: CommitDoc['status'];
      summary: string;
      source: CommitDoc['source'];
      ops: unknown[];
      applied: Pick<Applied, 'diff' | 'touched' | 'resolved'>;
      tree: Tree | null;
      rollbackOf?: string;
      id?: string;
    },
  ): Omit<CommitDoc, 'accountId'> => {
    const id = fields.id ?? newId('cmt');
    const merged = fields.status === 'merged';
    const now = new Date();
    return {
      _id: id,
      kind: 'commit',
      slot: merged ? mergedSlot(sheetId, head.version + 1) : proposalSlot(sheetId, id),
      sheetId,
      status: fields.status,
      seq: merged ? head.version + 1 : null,
      parentId: head.headCommitId,
      baseSeq: head.version,
      baseCommitId: head.headCommitId,
      summary: fields.summary,
      source: fields.source,
      authorKeyId: caller.keyId,
      resolvedByKeyId: merged ? caller.keyId : null,
      rebased: false,
      rollbackOf: fields.rollbackOf ?? null,
      changedCells: fields.applied.diff.changedCells,
      createdAt: now,
      resolvedAt: merged ? now : null,
      tree: fields.tree,
      ops: JSON.stringify(fields.ops),
      resolved: JSON.stringify(fields.applied.resolved),
      diff: JSON.stringify(fields.applied.diff),
      touched: JSON.stringify(fields.applied.touched),
    };
  };

  /**
   * Publish a merged commit: its blocks, then the commit in its slot (the compare-and-swap),
   * then the head. false when another commit took the slot (the caller re-reads and retries).
   */
  const publish = async (
    caller: Caller,
    sheetId: string,
    head: SheetHeadDoc,
    commit: Omit<CommitDoc, 'accountId'>,
    blocks: NewBlock[],
  ): Promise<boolean> => {
    const r = repo.forAccount(caller.accountId);
    await r.insertBlocks(sheetId, blocks);
    if (!(await r.insertCommit(commit))) {
      await r.deleteBlocks(
        sheetId,
        blocks.map((b) => b.id),
      );
      await rollForward(caller, sheetId, head);
      return false;
    }
    await r.moveHead(sheetId, head.version, {
      version: commit.seq!,
      headCommitId: commit._id,
      tree: commit.tree!,
      updatedAt: commit.createdAt,
    });
    return true;
  };

  /**
   * Merges of one sheet run one at a time within this process (a queue per sheet), so requests of
   * one process do not race each other; the slot compare-and-swap still decides between
   * processes, and the loser re-reads and re-applies.
   */
  const queues = new Map<string, Promise<void>>();
  const serial = async <T>(key: string, fn: () => Promise<T>): Promise<T> => {
    const prev = queues.get(key) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((r) => (release = r));
    const tail = prev.then(() => mine);
    queues.set(key, tail);
    await prev;
    try {
      return await fn();
    } finally {
      release();
      if (queues.get(key) === tail) queues.delete(key);
    }
  };

  const busy = (what: string) =>
    new AppError(
      'conflict',
      `${what}: the sheet kept changing under concurrent requests (${MERGE_TRIES} tries); send it again`,
    );

  const checkIfMatch = (head: SheetHeadDoc, expected: number | undefined) => {
    if (expected !== undefined && head.version !== expected) throw versionConflict('sheet', head.version, expected);
  };

  /** A merged commit moved the grid: the project's updatedAt follows, project.updated is announced. */
  const announceMerge = (caller: Caller, sheetId: string, version: number, commitId: string, at: Date) =>
    projects.sheetChanged(caller.accountId, sheetId, { version, commitId, at });

  const applyOrThrow = async (grid: WorkingGrid, ops: SheetOp[], prefix: string) => {
    try {
      return await applyOps(grid, ops);
    } catch (err) {
      if (err instanceof OpErrorAt) throw validation(`${prefix}${err.message}`);
      throw err;
    }
  };

  interface ChangeInput {
    ops: SheetOp[];
    rawOps: unknown[];
    propose: boolean;
    summary: string;
    source: 'ops' | 'edit';
    expectedVersion?: number;
    errorPrefix?: string;
    /** The commit's id (every try uses it): what a paid edit's hold names as its delivery. */
    commitId?: string;
    /** The version the ops were made for (the edit's sample); by default the head's when the request arrived. */
    baseVersion?: number;
    /** Runs right before the write that stores the commit (a paid edit's guard: see platform/credits/paid-call.ts). */
    beforeWrite?: () => Promise<void>;
  }

  /** Ops that were valid for version `before` and do not apply to the head: 409 conflict when the head moved since, else the 400 as is. */
  const movedUnder = (err: unknown, before: number, now: number, waited: boolean) =>
    (waited || now !== before) && err instanceof AppError && err.code === 'validation_error'
      ? new AppError(
          'conflict',
          `the sheet changed while this request waited (version ${before}, now ${now}) and the ops no longer apply: ${err.message}`,
        )
      : err;

  /** Ops as a commit: proposed (grid unchanged), or merged with compare-and-swap and bounded retries. */
  const change = async (caller: Caller, sheetId: string, input: ChangeInput) => {
    const prefix = input.errorPrefix ?? '';
    if (input.propose) {
      const head = await mustHead(caller.accountId, sheetId);
      checkIfMatch(head, input.expectedVersion);
      let applied: Applied;
      try {
        applied = await applyOrThrow(gridOf(caller.accountId, sheetId, head.tree), input.ops, prefix);
      } catch (err) {
        throw movedUnder(err, input.baseVersion ?? head.version, head.version, false);
      }
      const commit = newCommit(caller, sheetId, head, {
        status: 'proposed',
        summary: input.summary,
        source: input.source,
        ops: input.rawOps,
        applied,
        tree: null,
        id: input.commitId,
      });
      await input.beforeWrite?.();
      await repo.forAccount(caller.accountId).insertCommit(commit);
      return changeView({ ...commit, accountId: caller.accountId }, head.tree, head.version);
    }
    // The version before waiting in this process's queue: ops that no longer apply once earlier
    // commits merged are a 409 conflict (as when another process won the race), not a 400.
    const before = input.baseVersion ?? (await repo.forAccount(caller.accountId).headVersion(sheetId));
    if (before === null) throw new AppError('not_found', 'sheet not found');
    return serial(`${caller.accountId}:${sheetId}`, () => mergeOps(caller, sheetId, input, prefix, before));
  };

  const mergeOps = async (caller: Caller, sheetId: string, input: ChangeInput, prefix: string, before: number) => {
    for (let attempt = 1; attempt <= MERGE_TRIES; attempt++) {
      const head = await mustHead(caller.accountId, sheetId);
      checkIfMatch(head, input.expectedVersion);
      const grid = gridOf(caller.accountId, sheetId, head.tree);
      let applied: Applied;
      try {
        applied = await applyOrThrow(grid, input.ops, prefix);
      } catch (err) {
        // Valid when sent, but a commit merged meanwhile changed what the ops name.
        throw movedUnder(err, before, head.version, attempt > 1);
      }
      const { tree, newBlocks } = await finalize(grid, `${prefix}ops`);
      const commit = newCommit(caller, sheetId, head, {
        status: 'merged',
        summary: input.summary,
        source: input.source,
        ops: input.rawOps,
        applied,
        tree,
        id: input.commitId,
      });
      await input.beforeWrite?.();
      if (await publish(caller, sheetId, head, commit, newBlocks)) {
        await announceMerge(caller, sheetId, commit.seq!, commit._id, commit.createdAt);
        return changeView({ ...commit, accountId: caller.accountId }, tree, commit.seq!);
      }
      await backoff(attempt);
    }
    throw busy('ops');
  };

  const readRows = async (accountId: string, sheetId: string, tree: Tree) => {
    const grid = gridOf(accountId, sheetId, tree);
    await grid.ensureAll();
    return grid.all();
  };

  /** The cell diff between two grids (rollback): rows and columns matched by their stable ids. */
  const diffTrees = async (caller: Caller, sheetId: string, from: Tree, to: Tree): Promise<DiffView> => {
    const [a, b] = await Promise.all([
      readRows(caller.accountId, sheetId, from),
      readRows(caller.accountId, sheetId, to),
    ]);
    const aIdx = new Map(a.map((r, i) => [r.id, i]));
    const bIds = new Set(b.map((r) => r.id));
    const aCols = new Map(from.columns.map((c, i) => [c.id, i]));
    const bColIds = new Set(to.columns.map((c) => c.id));
    const cells: DiffView['cells'] = [];
    let changed = 0;
    b.forEach((row, bi) => {
      const ai = aIdx.get(row.id);
      if (ai === undefined) return;
      to.columns.forEach((col, ci) => {
        const ac = aCols.get(col.id);
        if (ac === undefined) return;
        const before = a[ai]!.v[ac] ?? null;
        const after = row.v[ci] ?? null;
        if (before === after) return;
        changed++;
        if (cells.length < SHEET_LIMITS.diffCells)
          cells.push({ cell: a1(ci, bi + 1), row: bi + 1, column: col.name, before, after });
      });
    });
    const structure: DiffView['structure'] = [];
    const removed = a.flatMap((r, i) => (bIds.has(r.id) ? [] : [{ row: i + 1, values: r.v }]));
    const restored = b.flatMap((r, i) => (aIdx.has(r.id) ? [] : [{ row: i + 1, values: r.v }]));
    if (removed.length)
      structure.push({
        op: 'deleteRows',
        description: `removed ${removed.length} row(s) made after that commit`,
        rows: removed.slice(0, SHEET_LIMITS.diffRows),
      });
    if (restored.length)
      structure.push({
        op: 'insertRows',
        description: `restored ${restored.length} row(s) deleted after that commit`,
        rows: restored.slice(0, SHEET_LIMITS.diffRows),
      });
    for (const c of from.columns)
      if (!bColIds.has(c.id))
        structure.push({ op: 'deleteColumn', description: `removed column "${c.name}" made after that commit` });
    for (const [i, c] of to.columns.entries()) {
      const ai = aCols.get(c.id);
      if (ai === undefined)
        structure.push({
          op: 'insertColumn',
          description: `restored column ${columnLetter(i)} "${c.name}" (${c.type})`,
        });
      else if (from.columns[ai]!.name !== c.name)
        structure.push({
          op: 'renameColumn',
          description: `renamed column "${from.columns[ai]!.name}" back to "${c.name}"`,
        });
      else if (from.columns[ai]!.type !== c.type)
        structure.push({ op: 'retypeColumn', description: `changed column "${c.name}" back to ${c.type}` });
    }
    const common = b.filter((r) => aIdx.has(r.id)).map((r) => r.id);
    const before = a.filter((r) => bIds.has(r.id)).map((r) => r.id);
    if (common.some((id, i) => id !== before[i])) structure.push({ op: 'sort', description: 'restored the row order' });
    return { cells, changedCells: changed, truncated: changed > cells.length, structure };
  };

  const ALL_TOUCHED: Touched = { cells: [], rows: [], cols: [], order: true, colOrder: true, all: true };

  return {
    repository: repo,

    /**
     * Create a sheet: a project of kind `sheet` (listed in GET /projects, announced as
     * project.created) plus its grid and the creation commit (seq 1). Columns and rows are
     * checked (400 naming `columns.<i>` or `rows.<r>.<c>`). Returns the sheet as GET answers it.
     */
    async create(input: CreateSheetInput) {
      const cols = z.array(ColumnDef).min(1).max(SHEET_LIMITS.columns).safeParse(input.columns);
      if (!cols.success) throw validation(`columns: must be 1 to ${SHEET_LIMITS.columns} columns of { name, type }`);
      const seen = new Set<string>();
      cols.data.forEach((c, i) => {
        const k = c.name.toLowerCase();
        if (seen.has(k))
          throw validation(`columns.${i}.name: duplicates column "${clip(c.name)}" (names are unique, ignoring case)`);
        seen.add(k);
      });
      if (input.rows.length > SHEET_LIMITS.rows) throw validation(`rows: must have at most ${SHEET_LIMITS.rows} rows`);
      const tree = emptyTree(cols.data);
      const grid = new WorkingGrid(tree, async () => new Map());
      const rows = input.rows.map((values, ri) => {
        if (!Array.isArray(values)) throw validation(`rows.${ri}: must be an array of cell values in column order`);
        if (values.length > tree.columns.length)
          throw validation(`rows.${ri}: has ${values.length} values; the sheet has ${tree.columns.length} columns`);
        const v: Cell[] = tree.columns.map((col, ci) => {
          try {
            return checkCell(values[ci] ?? null, col);
          } catch (err) {
            if (err instanceof CellError) throw validation(`rows.${ri}.${ci}: ${err.message}`);
            throw err;
          }
        });
        return { id: grid.nextRowId++, v };
      });
      await grid.insertAt(0, rows);
      const { tree: done, newBlocks } = await finalize(grid, 'rows');

      const id = input.idFor ? input.idFor('prj') : newId('prj');
      const r = repo.forAccount(input.accountId);
      const caller: Caller = { accountId: input.accountId, keyId: input.authorKeyId ?? null };
      const head0: SheetHeadDoc = {
        _id: id,
        accountId: input.accountId,
        version: 0,
        headCommitId: null as unknown as string,
        tree: done,
        createdAt: new Date(),
        updatedAt: new Date(),
      };
      const commit = newCommit(caller, id, head0, {
        status: 'merged',
        summary: `Created with ${done.columns.length} column(s) and ${done.rowCount} row(s)`,
        source: 'create',
        ops: [],
        applied: {
          resolved: [],
          touched: ALL_TOUCHED,
          diff: {
            cells: [],
            changedCells: 0,
            truncated: false,
            structure: [
              {
                op: 'create',
                description: `created with columns ${done.columns.map((c) => `"${c.name}" (${c.type})`).join(', ')} and ${done.rowCount} row(s)`,
              },
            ],
          },
        },
        tree: done,
      });
      commit.parentId = null;
      commit.baseCommitId = null;
      // Grid first, then the project (which announces project.created): a listed sheet always has its grid.
      await r.insertBlocks(id, newBlocks);
      let first: Omit<CommitDoc, 'accountId'> = commit;
      if (!(await r.insertCommit(commit))) {
        // The creation slot is taken: a retry with the same id (an Idempotency-Key retry of
        // POST /templates/{id}/use names the same project) whose first attempt stored the
        // creation commit and maybe died before the head or the project. Complete that sheet
        // with its own commit (the retry's body is the same: the key guarantees it).
        await r.deleteBlocks(
          id,
          newBlocks.map((b) => b.id),
        );
        const stored = input.idFor ? await r.commitAt(id, 1) : null;
        if (!stored?.tree) throw new AppError('conflict', 'a sheet with this id exists already');
        first = stored;
      }
      const fresh: SheetHeadDoc = {
        ...head0,
        tree: first.tree!,
        version: 1,
        headCommitId: first._id,
        updatedAt: first.createdAt,
        createdAt: first.createdAt,
      };
      const head = (await r.insertHead(fresh)) ? fresh : await mustHead(input.accountId, id);
      const project = await projects.create({
        accountId: input.accountId,
        kind: 'sheet',
        name: input.name,
        description: input.description,
        tags: input.tags,
        content: null,
        idFor: () => id,
      });
      return sheetView(head, project, 1, SHEET_LIMITS.rowPageDefault);
    },

    async list(accountId: string, q: { limit: number; cursor?: string }) {
      const r = repo.forAccount(accountId);
      // Paged over the sheet projects (see pageSheets): total and data count the same sheets.
      const page = await r.pageSheets(q);
      // One findOne by _id each (FerretDB pushes _id equality down, not $in).
      const heads = new Map(
        (await Promise.all(page.data.map((p) => r.head(p._id)))).flatMap((h) => (h ? [[h._id, h] as const] : [])),
      );
      return mapPage({ ...page, data: page.data.filter((p) => heads.has(p._id)) }, (p) =>
        summaryView(heads.get(p._id)!, p),
      );
    },

    async get(accountId: string, id: string, q: { startRow: number; rowLimit: number }) {
      const [head, project] = await Promise.all([mustHead(accountId, id), mustProject(accountId, id)]);
      return sheetView(head, project, q.startRow, q.rowLimit);
    },

    /** GET /sheets/{id}/range: A1 over data rows; the end is clamped to the grid, a start outside it is 400. */
    async range(accountId: string, id: string, raw: string) {
      const parsed = parseRange(raw);
      if (!parsed) throw validation('range: must be A1 notation over data rows, e.g. A1:C10, A1, B:B, 2:5 or B2:D');
      const head = await mustHead(accountId, id);
      const tree = head.tree;
      const lastCol = tree.columns.length - 1;
      if (parsed.c1 > lastCol)
        throw validation(
          `range: column ${columnLetter(parsed.c1)} is beyond the last column (${columnLetter(lastCol)})`,
        );
      const wholeColumns = parsed.r2 === null && parsed.r1 === 1;
      if (parsed.r1 > tree.rowCount && !(wholeColumns && tree.rowCount === 0)) {
        throw validation(
          tree.rowCount === 0
            ? 'range: the sheet has no rows (row 1 is the first data row)'
            : `range: row ${parsed.r1} is beyond the last row (${tree.rowCount}; row 1 is the first data row)`,
        );
      }
      const c2 = Math.min(parsed.c2 ?? lastCol, lastCol);
      const r2 = Math.min(parsed.r2 ?? tree.rowCount, tree.rowCount);
      const width = c2 - parsed.c1 + 1;
      const maxRows = Math.max(1, Math.floor(SHEET_LIMITS.rangeCells / width));
      const end = Math.min(r2, parsed.r1 - 1 + maxRows);
      const grid = gridOf(accountId, id, tree);
      const start = parsed.r1 - 1;
      await grid.ensure(start, end);
      const rows = grid.slice(start, end).map((r) => r.v.slice(parsed.c1, c2 + 1));
      const truncated = end < r2;
      const from = columnLetter(parsed.c1);
      const to = columnLetter(c2);
      return {
        range: rows.length ? `${from}${start + 1}:${to}${end}` : `${from}:${to}`,
        requested: parsed.text,
        columns: columnsView(tree).slice(parsed.c1, c2 + 1),
        startRow: start + 1,
        rows,
        rowCount: tree.rowCount,
        truncated,
        nextRange: truncated ? `${from}${end + 1}:${to}${r2}` : null,
        version: head.version,
      };
    },

    /** POST /sheets/{id}/ops. */
    applyOps: (
      caller: Caller,
      id: string,
      body: { ops: SheetOp[]; propose?: boolean; summary?: string },
      rawOps: unknown[],
      expectedVersion?: number,
    ) =>
      change(caller, id, {
        ops: body.ops,
        rawOps,
        propose: body.propose ?? false,
        summary: body.summary?.trim() || describeOps(body.ops),
        source: 'ops',
        expectedVersion,
      }),

    async listCommits(
      accountId: string,
      id: string,
      q: { limit: number; cursor?: string; status?: CommitDoc['status'] },
    ) {
      await mustHead(accountId, id);
      const page = await repo.forAccount(accountId).pageCommits(id, q);
      return mapPage(page, commitSummary);
    },

    async getCommit(accountId: string, id: string, commitId: string) {
      await mustHead(accountId, id);
      const c = await repo.forAccount(accountId).commit(id, commitId);
      if (!c) throw new AppError('not_found', 'commit not found');
      return commitView(c);
    },

    /**
     * Merge or reject a proposal. Merging checks the merged commits since the proposal's base:
     * any that touched what the proposal touches → 409 stale_commit; otherwise the proposal's ops
     * are re-applied onto the current grid (rebased) and merged like fresh ops.
     */
    async resolve(caller: Caller, id: string, commitId: string, action: 'merge' | 'reject', expectedVersion?: number) {
      const r = repo.forAccount(caller.accountId);
      const notProposed = (c: CommitDoc) =>
        new AppError(
          'conflict',
          `commit ${c._id} is ${c.status}, not proposed: only proposed commits can be merged or rejected`,
        );
      if (action === 'reject') {
        const head = await mustHead(caller.accountId, id);
        checkIfMatch(head, expectedVersion);
        const c = await r.commit(id, commitId);
        if (!c) throw new AppError('not_found', 'commit not found');
        if (c.status !== 'proposed') throw notProposed(c);
        const done = await r.rejectProposal(id, commitId, {
          status: 'rejected',
          resolvedAt: new Date(),
          resolvedByKeyId: caller.keyId,
        });
        if (!done) throw notProposed((await r.commit(id, commitId)) ?? c);
        return changeView(done, head.tree, head.version);
      }
      return serial(`${caller.accountId}:${id}`, async () => {
        for (let attempt = 1; attempt <= MERGE_TRIES; attempt++) {
          const head = await mustHead(caller.accountId, id);
          checkIfMatch(head, expectedVersion);
          const p = await r.commit(id, commitId);
          if (!p) throw new AppError('not_found', 'commit not found');
          if (p.status !== 'proposed') throw notProposed(p);
          const later = (await r.mergedAfter(id, p.baseSeq)).filter((c) => (c.seq ?? 0) <= head.version);
          const why = conflictOf(
            JSON.parse(p.touched) as Touched,
            later.map((c) => ({ id: c._id, touched: JSON.parse(c.touched) as Touched })),
          );
          if (why)
            throw new AppError(
              'stale_commit',
              `commit ${p._id} is stale: ${why} after it was proposed (at version ${p.baseSeq}); make the change again on the current sheet (version ${head.version})`,
            );
          const grid = gridOf(caller.accountId, id, head.tree);
          let applied: Applied;
          try {
            applied = await reapplyOps(grid, JSON.parse(p.resolved) as ROp[]);
          } catch (err) {
            if (err instanceof OpErrorAt)
              throw new AppError(
                'stale_commit',
                `commit ${p._id} is stale: it no longer applies to version ${head.version} (${err.message})`,
              );
            throw err;
          }
          const { tree, newBlocks } = await finalize(grid, 'commit');
          const now = new Date();
          await r.insertBlocks(id, newBlocks);
          const outcome = await r.mergeProposal(id, commitId, {
            status: 'merged',
            slot: mergedSlot(id, head.version + 1),
            seq: head.version + 1,
            parentId: head.headCommitId,
            rebased: head.version !== p.baseSeq,
            resolvedAt: now,
            resolvedByKeyId: caller.keyId,
            tree,
            changedCells: applied.diff.changedCells,
            resolved: JSON.stringify(applied.resolved),
            diff: JSON.stringify(applied.diff),
            touched: JSON.stringify(applied.touched),
          });
          if (outcome === 'ok') {
            await r.moveHead(id, head.version, {
              version: head.version + 1,
              headCommitId: commitId,
              tree,
              updatedAt: now,
            });
            const merged = await r.commit(id, commitId);
            await announceMerge(caller, id, head.version + 1, commitId, now);
            return changeView(merged!, tree, head.version + 1);
          }
          await r.deleteBlocks(
            id,
            newBlocks.map((b) => b.id),
          );
          if (outcome === 'gone') throw notProposed((await r.commit(id, commitId)) ?? p);
          await rollForward(caller, id, head);
          await backoff(attempt);
        }
        throw busy('merge');
      });
    },

    /** Restore the grid of a merged commit as a new merged commit (history is never rewritten). */
    rollback(caller: Caller, id: string, body: { commitId: string; summary?: string }, expectedVersion?: number) {
      const r = repo.forAccount(caller.accountId);
      return serial(`${caller.accountId}:${id}`, async () => {
        for (let attempt = 1; attempt <= MERGE_TRIES; attempt++) {
          const head = await mustHead(caller.accountId, id);
          checkIfMatch(head, expectedVersion);
          const target = await r.commit(id, body.commitId);
          if (!target) throw new AppError('not_found', 'commit not found');
          if (target.status !== 'merged' || !target.tree)
            throw new AppError(
              'conflict',
              `commit ${target._id} is ${target.status}: only merged commits can be rolled back to`,
            );
          if (sameTree(head.tree, target.tree))
            throw new AppError(
              'conflict',
              `the grid already is as it was at commit ${target._id}; nothing to roll back`,
            );
          const diff = await diffTrees(caller, id, head.tree, target.tree);
          const tree: Tree = {
            ...target.tree,
            nextRowId: Math.max(head.tree.nextRowId, target.tree.nextRowId),
            nextColId: Math.max(head.tree.nextColId, target.tree.nextColId),
          };
          diff.structure.unshift({
            op: 'rollback',
            description: `restored the grid of commit ${target._id} (version ${target.seq})`,
          });
          const commit = newCommit(caller, id, head, {
            status: 'merged',
            summary: body.summary?.trim() || `Roll back to version ${target.seq} (${target._id})`,
            source: 'rollback',
            ops: [],
            applied: { resolved: [], touched: ALL_TOUCHED, diff },
            tree,
            rollbackOf: target._id,
          });
          if (await publish(caller, id, head, commit, [])) {
            await announceMerge(caller, id, commit.seq!, commit._id, commit.createdAt);
            return changeView({ ...commit, accountId: caller.accountId }, tree, commit.seq!);
          }
          await backoff(attempt);
        }
        throw busy('rollback');
      });
    },

    /**
     * POST /sheets/{id}/edit: a paid call to the sheet pool (platform/credits/paid-call.ts): hold the
     * credits, ask the pool for ops (RabbitMQ request/reply with a deadline), validate them like
     * user ops, apply or propose them as a commit; capture only when the commit exists, release
     * on any failure (504 when the pool does not answer in time, 503 when it is unreachable, 400
     * when the instruction or the engine's ops do not apply, 409 when the sheet moved). The hold
     * names the commit (its id is chosen up front), so a crash or a failed capture after the
     * commit was stored is captured by the scheduler, never refunded: no edit is free, and the
     * answer is a success once the commit exists (a retry would apply it twice).
     */
    async edit(
      caller: Caller,
      id: string,
      requestId: string,
      body: { instruction: string; propose?: boolean },
      expectedVersion?: number,
    ) {
      const head = await mustHead(caller.accountId, id);
      checkIfMatch(head, expectedVersion);
      const grid = gridOf(caller.accountId, id, head.tree);
      const sampleEnd = Math.min(SHEET_EDIT_SAMPLE_ROWS, grid.rowCount);
      await grid.ensure(0, sampleEnd);
      const payload: SheetRpcRequest = {
        kind: 'edit',
        instruction: body.instruction,
        columns: columnsView(head.tree),
        sample: grid.slice(0, sampleEnd).map((r) => r.v),
        rowCount: grid.rowCount,
      };
      const commitId = newId('cmt');
      const { result, charged } = await paidCall<SheetRpcReply, ReturnType<typeof changeView> & { engine: string }>(
        rt,
        {
          pool: 'sheet',
          operation: 'edit',
          payload,
          timeoutMs: rt.config.SHEET_RPC_TIMEOUT_MS,
          charge: 'sheet_edit',
          accountId: caller.accountId,
          requestId,
          deliveredBy: { collection: COLLECTIONS.sheetCommits, id: commitId },
          deliver: async (reply, guard) => {
            const engine = reply.engine;
            const parsed = SheetOps.safeParse(reply.ops, { reportInput: true });
            if (!parsed.success) {
              const first = parsed.error.issues[0]!;
              throw validation(
                `the ${engine} engine wrote ops that are not valid (ops.${first.path.map(String).join('.')}: ${first.message})`,
              );
            }
            const out = await change(caller, id, {
              ops: parsed.data,
              rawOps: reply.ops,
              propose: body.propose ?? false,
              summary: body.instruction,
              source: 'edit',
              expectedVersion,
              errorPrefix: `instruction: the ${engine} engine's ops do not apply to this sheet: `,
              commitId,
              baseVersion: head.version,
              beforeWrite: guard,
            });
            return { ...out, engine };
          },
        },
      );
      return { ...result, charged: fromUnits(charged) };
    },
  };
}
