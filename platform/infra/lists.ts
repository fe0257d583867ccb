import type { Collection, Document, Filter, Sort } from 'mongodb';
import { AppError } from './errors';

/**
 * Keyset pagination for every list endpoint (SPEC 2.3, 4 rule 2): a stable sort on one field
 * plus `_id` as the tie-breaker, and an opaque cursor holding the last item's (value, _id).
 * The next page asks for items strictly after that pair, so items added or deleted while a client
 * pages never shift the pages it has not read yet: no item is skipped or repeated (unlike
 * skip/offset). An item whose sort value changes while a client pages (an update moves it in an
 * `updatedAt` order) is seen where it is when its page is read.
 *
 * The cursor is base64url JSON `[tag, value, id]`; `tag` names the list and sort it belongs to, so
 * a cursor of another list or sort is refused (400 validation_error "cursor: …") instead of
 * silently returning the wrong page.
 */
export interface KeysetOptions {
  /** Names the list and its sort inside the cursor, e.g. `projects:updatedAt:desc`. */
  tag: string;
  /** The sort field (a Date, number or string field); `_id` breaks ties. */
  field: string;
  direction: 1 | -1;
  limit: number;
  cursor?: string;
  /** Fields to leave out or keep (a find projection), e.g. `{ content: 0 }` for list items. */
  projection?: Document;
}

export interface Page<T> {
  data: T[];
  total: number;
  /** Present only when more items exist (SPEC 2.3). */
  cursor: string | null;
}

type CursorValue = string | number | { d: number } | null;

const wrap = (v: unknown): CursorValue => (v instanceof Date ? { d: v.getTime() } : ((v as CursorValue) ?? null));
const unwrap = (v: CursorValue): unknown => (v !== null && typeof v === 'object' ? new Date(v.d) : v);

export function encodeCursor(tag: string, value: unknown, id: string): string {
  return Buffer.from(JSON.stringify([tag, wrap(value), id])).toString('base64url');
}

const BAD_CURSOR = 'cursor: is not a cursor returned by this list; pass it back verbatim';

/** The (value, id) a cursor of list `tag` holds; 400 validation_error when it is not one. */
export function decodeCursor(tag: string, raw: string): { value: unknown; id: string } {
  try {
    const parsed = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(parsed) && parsed.length === 3 && parsed[0] === tag && typeof parsed[2] === 'string') {
      const v = parsed[1] as CursorValue;
      const ok =
        v === null ||
        typeof v === 'string' ||
        (typeof v === 'number' && Number.isFinite(v)) ||
        (typeof v === 'object' &&
          typeof (v as { d?: unknown }).d === 'number' &&
          Number.isFinite((v as { d: number }).d));
      if (ok) return { value: unwrap(v), id: parsed[2] };
    }
  } catch {
    // falls through
  }
  throw new AppError('validation_error', BAD_CURSOR);
}

/**
 * One page of a list held whole in memory (a bounded set: the folder tree, webhooks, voices,
 * faces): every item without `limit`, else `limit` items from the cursor's position on, with a
 * cursor while more remain. The cursor holds a position, so an item added or removed between
 * pages shifts the rest by one; these lists are small and change rarely.
 */
export function pageWhole<T>(
  items: readonly T[],
  q: { limit?: number; cursor?: string },
  tag: string,
): { data: T[]; total: number; cursor?: string } {
  let from = 0;
  if (q.cursor !== undefined) {
    const { value } = decodeCursor(tag, q.cursor);
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 0)
      throw new AppError('validation_error', BAD_CURSOR);
    from = value;
  }
  const to = q.limit === undefined ? items.length : from + q.limit;
  const data = items.slice(from, to);
  return { data, total: items.length, ...(to < items.length ? { cursor: encodeCursor(tag, to, '') } : {}) };
}

/**
 * The list envelope of a page (SPEC 2.3): its items mapped to their API shape, the total, and
 * `cursor` only when more pages exist (never `cursor: null`).
 */
export function mapPage<T, U>(
  page: Pick<Page<T>, 'data' | 'total'> & { cursor?: string | null },
  fn: (item: T) => U,
): { data: U[]; total: number; cursor?: string } {
  return {
    data: page.data.map((item) => fn(item)),
    total: page.total,
    ...(page.cursor ? { cursor: page.cursor } : {}),
  };
}

/**
 * One page of `col` matching `filter` (which must hold the tenant filter), in keyset order.
 * Two commands: the page (limit + 1 rows, to know whether more exist) and the count.
 */
export async function keysetPage<T extends Document & { _id: string }>(
  col: Pick<Collection<T>, 'find' | 'countDocuments'>,
  filter: Filter<T>,
  opts: KeysetOptions,
): Promise<Page<T>> {
  const { field, direction } = opts;
  const cmp = direction === -1 ? '$lt' : '$gt';
  let pageFilter: Filter<T> = filter;
  if (opts.cursor) {
    const after = decodeCursor(opts.tag, opts.cursor);
    pageFilter = {
      $and: [
        filter,
        { $or: [{ [field]: { [cmp]: after.value } }, { [field]: after.value, _id: { [cmp]: after.id } }] },
      ],
    } as Filter<T>;
  }
  const sort = { [field]: direction, _id: direction } as Sort;
  const [rows, total] = await Promise.all([
    col
      .find(pageFilter, opts.projection ? { projection: opts.projection } : {})
      .sort(sort)
      .limit(opts.limit + 1)
      .toArray(),
    col.countDocuments(filter),
  ]);
  const more = rows.length > opts.limit;
  const data = rows.slice(0, opts.limit) as T[];
  const last = data[data.length - 1];
  return {
    data,
    total,
    cursor: more && last ? encodeCursor(opts.tag, (last as Record<string, unknown>)[field], last._id) : null,
  };
}
