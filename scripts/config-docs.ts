/**
 * `npm run config:docs`: writes the configuration keys as a Markdown table into
 * docs/configuration.md, between its `<!-- config-table:start -->` and `<!-- config-table:end -->`
 * markers (everything else in the file is left as it is).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { ConfigSchema } from '../platform/infra/config';

const START = '<!-- config-table:start -->';
const END = '<!-- config-table:end -->';

/** The table of every key of the config schema: key, default, description. */
export function configTable(): string {
  const rows = Object.entries(ConfigSchema.shape).map(([key, schema]) => {
    const s = schema as z.ZodType;
    const json = z.toJSONSchema(s, { io: 'input', unrepresentable: 'any' }) as { default?: unknown };
    let def = json.default;
    if (def === undefined) {
      const r = s.safeParse(undefined);
      def = r.success ? r.data : undefined;
    }
    const shown = def === undefined ? '' : typeof def === 'string' ? def : JSON.stringify(def);
    return `| \`${key}\` | ${shown ? `\`${shown}\`` : ''} | ${(s.description ?? '').replaceAll('|', '\\|')} |`;
  });
  return `| Key | Default | What it does |\n|---|---|---|\n${rows.join('\n')}`;
}

/** `doc` with the text between the markers replaced by `table`; throws when a marker is missing. */
export function withConfigTable(doc: string, table: string): string {
  const start = doc.indexOf(START);
  const end = doc.indexOf(END);
  if (start < 0 || end < start) throw new Error(`the markers ${START} and ${END} are missing or out of order`);
  return `${doc.slice(0, start + START.length)}\n${table}\n${doc.slice(end)}`;
}

const target = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'docs', 'configuration.md');

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const before = readFileSync(target, 'utf8');
  const after = withConfigTable(before, configTable());
  if (after !== before) writeFileSync(target, after);
  console.log(
    `${path.relative(process.cwd(), target)}: configuration table ${after === before ? 'already current' : 'written'}`,
  );
}
