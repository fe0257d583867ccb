import type { Template, TemplateListQuery, TemplateUse } from '../../contracts/templates';
import { notFound } from '../infra/errors';
import { decodeCursor, encodeCursor, mapPage } from '../infra/lists';
import type { Runtime } from '../runtime';
import { createSheetsService } from '../sheets/sheets.service';
import { createProjectsService } from '../projects/projects.service';
import { templateById, TEMPLATES, type SheetTemplateContent } from './templates.catalog';

const CURSOR_TAG = 'templates';

/**
 * GET /templates: the built-in set in its fixed order, with the same envelope, limit and opaque
 * cursor as every list (the cursor names the last template of the page).
 */
export function listTemplates(q: TemplateListQuery): { data: Template[]; total: number; cursor?: string } {
  const all = TEMPLATES.filter(
    (t) => (!q.kind || t.kind === q.kind) && (!q.projectType || t.projectType === q.projectType),
  );
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
  return mapPage(
    { data, total: all.length, cursor: more ? encodeCursor(CURSOR_TAG, null, data[data.length - 1]!.id) : null },
    (t) => t,
  );
}

/**
 * POST /templates/{id}/use: a new project of the account with the template's content, through
 * the capability that makes that kind (a sheet template through the sheets service, which
 * stores its grid and creation commit).
 */
export function createTemplatesService(rt: Runtime) {
  const projects = createProjectsService(rt);
  const sheets = createSheetsService(rt);
  return {
    async use(accountId: string, templateId: string, body: TemplateUse, idFor?: (prefix: string) => string) {
      const t = templateById(templateId);
      if (!t) throw notFound('template');
      const meta = {
        accountId,
        name: body.name ?? t.name,
        description: body.description ?? t.description,
        tags: body.tags ?? t.tags,
      };
      if (t.kind === 'sheet') {
        const id = idFor ? idFor('prj') : projects.repository.newId();
        const c = structuredClone(t.content) as SheetTemplateContent;
        await sheets.create({ ...meta, columns: c.columns, rows: c.rows, idFor: () => id });
        return projects.get(accountId, id);
      }
      return projects.view(
        await projects.create({ ...meta, kind: t.kind, content: structuredClone(t.content), idFor }),
      );
    },
  };
}
