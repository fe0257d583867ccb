import { z } from 'zod';
import { line, listEnvelope, listQuery, text, Version } from './common';
import { Tags } from './projects';

/**
 * Boards and cards (SPEC 4.5). A board is a set of ordered lanes (columns); a card sits in one
 * lane at an order key. Boards are not projects: they have their own list and ids (`brd_`).
 * WARNING: field names, limits and error codes here are public contract.
 */
export const BOARD_LIMITS = {
  nameMax: 255,
  descriptionMax: 5000,
  /** Lanes per board. */
  columnsMin: 1,
  columnsMax: 20,
  columnNameMax: 100,
  /** Characters of a lane id (letters, digits, `_`, `-`). */
  columnIdMax: 64,
  cardTitleMax: 500,
  /** Characters of a card body (Markdown). */
  cardBodyMax: 20_000,
  labelsMax: 20,
  labelMax: 64,
  assigneeMax: 256,
  /** Projects one card links to. */
  projectLinksMax: 20,
} as const;

/** The lanes a board gets when `columns` is omitted. */
export const DEFAULT_COLUMNS = [
  { id: 'todo', name: 'To do' },
  { id: 'doing', name: 'Doing' },
  { id: 'done', name: 'Done' },
] as const;

const nonEmpty = { error: 'must not be empty' };

export const ColumnId = z
  .string({ error: 'must be a string' })
  .min(1, nonEmpty)
  .max(BOARD_LIMITS.columnIdMax, { error: `must be at most ${BOARD_LIMITS.columnIdMax} characters` })
  .regex(/^[A-Za-z0-9_-]+$/, { error: 'must be letters, digits, _ and -' })
  .describe(`A lane id: 1 to ${BOARD_LIMITS.columnIdMax} letters, digits, _ and -; unique within the board.`);

const cardRef = z
  .string({ error: 'must be a card id' })
  .min(1, nonEmpty)
  .max(128, { error: 'must be at most 128 characters' })
  .regex(/^[A-Za-z0-9_-]+$/, { error: 'must be a card id' });

/** A lane as sent: keep `id` to keep (rename, reorder) an existing lane; omit it for a new one. */
export const BoardColumnInput = z
  .strictObject({
    id: ColumnId.optional().describe(
      'Omit for a new lane: the id is made from the name (e.g. "In review" → in-review).',
    ),
    name: line(BOARD_LIMITS.columnNameMax).trim().min(1, nonEmpty).describe('Lane title.'),
  })
  .meta({ id: 'BoardColumnInput' });
export type BoardColumnInput = z.output<typeof BoardColumnInput>;

const columnsInput = z
  .array(BoardColumnInput, { error: 'must be an array of {id?, name}' })
  .min(BOARD_LIMITS.columnsMin, { error: `must have at least ${BOARD_LIMITS.columnsMin} column` })
  .max(BOARD_LIMITS.columnsMax, { error: `must have at most ${BOARD_LIMITS.columnsMax} columns` })
  .superRefine((cols, ctx) => {
    const seen = new Set<string>();
    cols.forEach((c, i) => {
      if (c.id === undefined) return;
      if (seen.has(c.id)) ctx.addIssue({ code: 'custom', path: [i, 'id'], message: `duplicate column id "${c.id}"` });
      seen.add(c.id);
    });
  });

const boardName = line(BOARD_LIMITS.nameMax).trim().min(1, nonEmpty);
const boardDescription = text(BOARD_LIMITS.descriptionMax);

export const BoardCreate = z
  .strictObject({
    name: boardName.describe(`Board name, 1 to ${BOARD_LIMITS.nameMax} characters.`),
    description: boardDescription
      .optional()
      .describe(`Up to ${BOARD_LIMITS.descriptionMax} characters; default empty.`),
    columns: columnsInput
      .optional()
      .describe(
        `Ordered lanes, ${BOARD_LIMITS.columnsMin} to ${BOARD_LIMITS.columnsMax}; default To do (todo), Doing (doing), Done (done).`,
      ),
    tags: Tags.optional().describe('At most 20 tags of at most 64 characters.'),
  })
  .meta({ id: 'BoardCreate' });
export type BoardCreate = z.output<typeof BoardCreate>;

/** PATCH: only the fields passed change. `columns` is the whole new ordered list of lanes. */
export const BoardUpdate = z
  .strictObject({
    name: boardName.optional(),
    description: boardDescription.optional(),
    columns: columnsInput
      .optional()
      .describe(
        'The complete new ordered list of lanes. Lanes are matched by id: a listed id keeps its lane (renamed and moved as given), an item without id (or with a new id) adds a lane, and a lane left out is removed. Removing a lane that still holds cards is refused with 409 column_not_empty: move or delete its cards first.',
      ),
    tags: Tags.optional(),
  })
  .refine((b) => Object.values(b).some((v) => v !== undefined), {
    error: 'body: name a field to change: name, description, columns or tags',
  })
  .meta({ id: 'BoardUpdate', minProperties: 1 }); // the refinement above, as JSON Schema
export type BoardUpdate = z.output<typeof BoardUpdate>;

export const BoardDuplicate = z
  .strictObject({
    name: boardName.optional().describe('Name of the copy; default "<name> (copy)".'),
  })
  .meta({ id: 'BoardDuplicate' });
export type BoardDuplicate = z.output<typeof BoardDuplicate>;

export const BoardColumn = z
  .object({
    id: z.string().describe('Lane id, unique within the board; cards name it in `column`.'),
    name: z.string(),
    cardCount: z
      .number()
      .int()
      .optional()
      .describe(
        'Cards in the lane: on GET /boards/{id} and on the answers of create, update and duplicate; list items leave it out.',
      ),
  })
  .meta({ id: 'BoardColumn' });

export const Board = z
  .object({
    id: z.string().describe('brd_ followed by a random part.'),
    name: z.string(),
    description: z.string(),
    columns: z.array(BoardColumn).describe('Lanes, in display order.'),
    tags: z.array(z.string()),
    cardCount: z
      .number()
      .int()
      .optional()
      .describe('Cards on the board (with the per-lane counts; not on list items).'),
    version: Version,
    openUrl: z.string().describe('Absolute editor link, /boards/{boardId}.'),
    createdAt: z.string(),
    updatedAt: z
      .string()
      .describe('Last change of the board itself (name, description, lanes, tags); card changes do not move it.'),
  })
  .meta({ id: 'Board' });
export type Board = z.infer<typeof Board>;

export const BoardList = listEnvelope(Board).meta({ id: 'BoardList' });

export const BoardListQuery = listQuery({
  tag: line(64).optional().describe('Only boards with this tag.'),
});

// ---- Cards ----------------------------------------------------------------------------

const title = line(BOARD_LIMITS.cardTitleMax).trim().min(1, nonEmpty);
const body = text(BOARD_LIMITS.cardBodyMax);
const labels = z
  .array(line(BOARD_LIMITS.labelMax).trim().min(1, nonEmpty), { error: 'must be an array of strings' })
  .max(BOARD_LIMITS.labelsMax, { error: `must have at most ${BOARD_LIMITS.labelsMax} labels` });
const assignee = line(BOARD_LIMITS.assigneeMax).trim().min(1, nonEmpty).nullable();
const dueDate = z.iso.date({ error: 'must be a date YYYY-MM-DD' }).nullable();
const projectIds = z
  .array(
    z
      .string({ error: 'must be a project id' })
      .min(1, nonEmpty)
      .max(128, { error: 'must be at most 128 characters' })
      .regex(/^[A-Za-z0-9_-]+$/, { error: 'must be a project id' }),
    {
      error: 'must be an array of project ids',
    },
  )
  .max(BOARD_LIMITS.projectLinksMax, { error: `must have at most ${BOARD_LIMITS.projectLinksMax} projects` });

const placement = {
  before: cardRef
    .nullable()
    .optional()
    .describe(
      'Place the card immediately before this card (of the same board). null alone: at the bottom of the lane.',
    ),
  after: cardRef
    .nullable()
    .optional()
    .describe(
      'Place the card immediately after this card (of the same board). null alone: at the top of the lane. With before too: between the two, which must be in that order in one lane.',
    ),
};

const PLACEMENT_RULE = (v: { before?: string | null; after?: string | null }, ctx: z.RefinementCtx) => {
  if (v.before === null && v.after === null)
    ctx.addIssue({
      code: 'custom',
      path: ['before'],
      message: 'before and after cannot both be null: give one of them',
    });
  if (v.before && v.after && v.before === v.after)
    ctx.addIssue({ code: 'custom', path: ['before'], message: 'must differ from after' });
};

export const CardCreate = z
  .strictObject({
    title: title.describe(`1 to ${BOARD_LIMITS.cardTitleMax} characters, one line.`),
    body: body.optional().describe(`Markdown, up to ${BOARD_LIMITS.cardBodyMax} characters; default empty.`),
    column: ColumnId.optional().describe('Lane id; default the lane of before/after, else the first lane.'),
    ...placement,
    labels: labels
      .optional()
      .describe(
        `At most ${BOARD_LIMITS.labelsMax} labels of at most ${BOARD_LIMITS.labelMax} characters; duplicates are dropped.`,
      ),
    assignee: assignee.optional().describe('Free text (a name or an email); null for nobody.'),
    dueDate: dueDate.optional().describe('ISO date YYYY-MM-DD, or null.'),
    projectIds: projectIds
      .optional()
      .describe(
        `Projects of your account the card links to (at most ${BOARD_LIMITS.projectLinksMax}); an id that is not one of yours is 400 naming it.`,
      ),
  })
  .superRefine(PLACEMENT_RULE)
  .meta({
    id: 'CardCreate',
    not: { required: ['before', 'after'], properties: { before: { const: null }, after: { const: null } } },
  }); // PLACEMENT_RULE's first half
export type CardCreate = z.output<typeof CardCreate>;

/** PATCH: only the fields passed change; column/before/after move the card (one write). */
export const CardUpdate = z
  .strictObject({
    title: title.optional(),
    body: body.optional(),
    column: ColumnId.optional().describe('Move to this lane (at its bottom unless before/after say where).'),
    ...placement,
    labels: labels.optional(),
    assignee: assignee.optional(),
    dueDate: dueDate.optional(),
    projectIds: projectIds.optional(),
  })
  .refine((b) => Object.values(b).some((v) => v !== undefined), {
    error: 'body: name a field to change: title, body, column, before, after, labels, assignee, dueDate or projectIds',
  })
  .superRefine(PLACEMENT_RULE)
  .meta({
    id: 'CardUpdate',
    minProperties: 1,
    not: { required: ['before', 'after'], properties: { before: { const: null }, after: { const: null } } },
  }); // the refinements above, as JSON Schema (PLACEMENT_RULE's first half)
export type CardUpdate = z.output<typeof CardUpdate>;

export const Card = z
  .object({
    id: z.string().describe('crd_ followed by a random part.'),
    boardId: z.string(),
    title: z.string(),
    body: z.string().describe('Markdown.'),
    column: z.string().describe('Lane id.'),
    position: z
      .string()
      .describe(
        'Order key within the lane (fractional index): cards sort by lane order, then position, then id. Opaque; compare as plain strings (byte order). Move a card with before/after, not by writing it.',
      ),
    labels: z.array(z.string()),
    assignee: z.string().nullable(),
    dueDate: z.string().nullable().describe('YYYY-MM-DD.'),
    projectIds: z.array(z.string()).describe('Linked projects of the account.'),
    version: Version,
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: 'Card' });
export type Card = z.infer<typeof Card>;

export const CardList = listEnvelope(Card).meta({ id: 'CardList' });

export const CardListQuery = listQuery({
  column: ColumnId.optional().describe('Only cards of this lane.'),
  label: line(BOARD_LIMITS.labelMax).optional().describe('Only cards with this label (exact).'),
  assignee: line(BOARD_LIMITS.assigneeMax).optional().describe('Only cards with this assignee (exact).'),
});
