import type { Template, TemplateListQuery } from '../../contracts/templates';
import { decodeCursor, encodeCursor } from '../../platform/lists';
import { TEMPLATES } from './templates.catalog';

const CURSOR_TAG = 'templates';

/**
 * GET /templates: the built-in set in its fixed order, with the same envelope, limit and opaque
 * cursor as every list (the cursor names the last template of the page).
 */
export function listTemplates(q: TemplateListQuery): { data: Template[]; total: number; cursor: string | null } {
  const all = TEMPLATES.filter((t) => (!q.kind || t.kind === q.kind) && (!q.projectType || t.projectType === q.projectType));
  let start = 0;
  if (q.cursor) {
    const after = decodeCursor(CURSOR_TAG, q.cursor);
    // The set is fixed in code; a template gone since the cursor was made ends the list.
    const at = TEMPLATES.findIndex((t) => t.id === after.id);
    const order = new Map(TEMPLATES.map((t, i) => [t.id, i]));
    start = at < 0 ? all.length : all.findIndex((t) => order.get(t.id)! > at);
    if (start < 0) start = all.length;
  }
  const data = all.slice(start, start + q.limit);
  const more = start + q.limit < all.length;
  return { data, total: all.length, cursor: more ? encodeCursor(CURSOR_TAG, null, data[data.length - 1]!.id) : null };
}
