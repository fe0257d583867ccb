import { z } from 'zod';
import { BOARD_LIMITS, BoardCreate, CardCreate } from '../../../contracts/boards';
import { line } from '../../../contracts/common';
import { PresentationRequest } from '../../../contracts/presentations';
import { SHEET_LIMITS, type ColumnType } from '../../../contracts/sheets';
import { BOARD_ID_PREFIX, CARD_ID_PREFIX, createBoardsService } from '../../boards/boards.service';
import { stableId } from '../../infra/ids';
import { isDuplicateKey } from '../../infra/mongo';
import { createPresentationsService } from '../../presentations/presentations.service';
import type { Runtime } from '../../runtime';
import { createSheetsService } from '../../sheets/sheets.service';
import { parseOrThrow } from '../../infra/validation';
import type { ToolDefinition } from '../tool';
import { jobData, projectArtifact } from './artifacts';

const title = line(255).trim().min(1, { error: 'must not be empty' }).describe('Title, one line.');

/** A column is `number` when every value given in it is a number (and there is one); else `string`. */
export function columnTypes(columns: readonly string[], rows: readonly (readonly (string | number)[])[]): ColumnType[] {
  return columns.map((_, c) => {
    const values = rows.map((r) => r[c]).filter((v) => v !== undefined && v !== '');
    return values.length > 0 && values.every((v) => typeof v === 'number') ? 'number' : 'string';
  });
}

/** Presentations (a charged deck job), sheets and boards. */
// Length: a list of tool definitions (input schemas and descriptions) sharing the presentations, sheets and
// boards services; the longest run is 40 lines.
export function workspaceTools(rt: Runtime): ToolDefinition[] {
  const presentations = createPresentationsService(rt);
  const sheets = createSheetsService(rt);
  const boards = createBoardsService(rt);
  const base = rt.config.PUBLIC_BASE_URL;

  const createPresentation: ToolDefinition<{ title: string; brief: string; slideCount?: number }> = {
    name: 'create_presentation',
    description:
      'Create a presentation whose slides are written from a brief and built in the background (a deck job, charged).',
    input: z.strictObject({
      title,
      brief: z
        .string({ error: 'must be a string' })
        .trim()
        .min(1, { error: 'must not be empty' })
        .max(20_000, { error: 'must be at most 20000 characters' })
        .describe('What the deck should say.'),
      slideCount: z
        .number({ error: 'must be a number' })
        .int({ error: 'must be an integer' })
        .min(3, { error: 'must be between 3 and 30' })
        .max(30, { error: 'must be between 3 and 30' })
        .optional()
        .describe('3 to 30; default 8.'),
    }),
    scope: 'ai',
    spends: ['deck'],
    async run(args, ctx) {
      const request = parseOrThrow(PresentationRequest, {
        name: args.title,
        brief: args.brief,
        ...(args.slideCount !== undefined ? { slideCount: args.slideCount } : {}),
      });
      const { body } = await presentations.create({
        accountId: ctx.account._id,
        features: ctx.account.features,
        requestId: ctx.requestId,
        request,
        idFor: ctx.idFor,
      });
      const data = body.job
        ? jobData(body.job.jobId, { generationStatus: body.generationStatus, slideCount: args.slideCount ?? 8 })
        : { generationStatus: body.generationStatus, slideCount: args.slideCount ?? 8 };
      return projectArtifact({
        type: 'presentation',
        title: body.name,
        kind: 'presentation',
        projectId: body.id,
        publicBaseUrl: base,
        data,
      });
    },
  };

  const cell = z.union(
    [
      z.string().max(SHEET_LIMITS.cellChars, { error: `must be at most ${SHEET_LIMITS.cellChars} characters` }),
      z.number().finite(),
    ],
    { error: 'must be a string or a number' },
  );
  const createSheet: ToolDefinition<{ title: string; columns: string[]; rows?: (string | number)[][] }> = {
    name: 'create_sheet',
    description:
      'Create a spreadsheet with named columns and optional rows (values in column order; a column of numbers is typed number).',
    input: z.strictObject({
      title,
      columns: z
        .array(line(SHEET_LIMITS.columnName).trim().min(1, { error: 'must not be empty' }), {
          error: 'must be an array of column names',
        })
        .min(1, { error: 'must have at least 1 column' })
        .max(SHEET_LIMITS.columns, { error: `must have at most ${SHEET_LIMITS.columns} columns` }),
      rows: z
        .array(z.array(cell, { error: 'must be an array of cell values' }), { error: 'must be an array of rows' })
        .max(1000, { error: 'must have at most 1000 rows' })
        .optional(),
    }),
    scope: 'ai',
    spends: [],
    async run(args, ctx) {
      const rows = args.rows ?? [];
      const types = columnTypes(args.columns, rows);
      const view = await sheets.create({
        accountId: ctx.account._id,
        name: args.title,
        columns: args.columns.map((name, i) => ({ name, type: types[i]! })),
        rows: rows.map((r) => r.map((v, i) => (types[i] === 'number' || typeof v === 'string' ? v : String(v)))),
        idFor: ctx.idFor,
        authorKeyId: null,
      });
      return projectArtifact({
        type: 'sheet',
        title: view.name,
        kind: 'sheet',
        projectId: view.id,
        publicBaseUrl: base,
        data: { columnCount: view.columnCount, rowCount: view.rowCount },
      });
    },
  };

  const createBoard: ToolDefinition<{
    title: string;
    columns?: string[];
    cards?: { title: string; column?: string }[];
  }> = {
    name: 'create_board',
    description:
      'Create a task board with lanes (default To do, Doing, Done) and cards (in the first lane unless a lane name is given).',
    input: z.strictObject({
      title,
      columns: z
        .array(line(BOARD_LIMITS.columnNameMax).trim().min(1, { error: 'must not be empty' }), {
          error: 'must be an array of lane names',
        })
        .min(1, { error: 'must have at least 1 lane' })
        .max(BOARD_LIMITS.columnsMax, { error: `must have at most ${BOARD_LIMITS.columnsMax} lanes` })
        .optional(),
      cards: z
        .array(
          z.strictObject({
            title: line(BOARD_LIMITS.cardTitleMax).trim().min(1, { error: 'must not be empty' }),
            column: line(BOARD_LIMITS.columnNameMax).optional().describe('Lane name (or id).'),
          }),
          { error: 'must be an array of {title, column?}' },
        )
        .max(100, { error: 'must have at most 100 cards' })
        .optional(),
    }),
    scope: 'ai',
    spends: [],
    async run(args, ctx) {
      const accountId = ctx.account._id;
      const input = parseOrThrow(BoardCreate, {
        name: args.title,
        ...(args.columns ? { columns: args.columns.map((name) => ({ name })) } : {}),
      });
      let board: Awaited<ReturnType<typeof boards.create>>;
      try {
        board = await boards.create(accountId, input, ctx.idFor);
      } catch (err) {
        // A repeated call (after a crash): the board is there; finish its cards.
        if (!isDuplicateKey(err)) throw err;
        board = await boards.get(accountId, ctx.idFor(BOARD_ID_PREFIX));
      }
      const laneOf = (name: string | undefined) => {
        if (name === undefined) return board.columns[0]!.id;
        const want = name.trim().toLowerCase();
        return (board.columns.find((c) => c.name.toLowerCase() === want || c.id === want) ?? board.columns[0]!).id;
      };
      const cards = args.cards ?? [];
      for (const [i, card] of cards.entries()) {
        const cardId = stableId(CARD_ID_PREFIX, `${board.id}\n${i}`);
        if (await boards.repository.forAccount(accountId).getCard(board.id, cardId)) continue;
        const body = parseOrThrow(CardCreate, { title: card.title, column: laneOf(card.column) });
        await boards.createCard(accountId, board.id, body, () => cardId);
      }
      const counted = await boards.get(accountId, board.id);
      return {
        type: 'social_board',
        title: counted.name,
        projectId: counted.id,
        openUrl: counted.openUrl,
        data: {
          boardId: counted.id,
          cardCount: counted.cardCount ?? cards.length,
          columnCount: counted.columns.length,
          columns: counted.columns.map((c) => ({ id: c.id, name: c.name, cardCount: c.cardCount ?? 0 })),
        },
      };
    },
  };

  return [createPresentation, createSheet, createBoard];
}
