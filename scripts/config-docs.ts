/** Prints the configuration keys as a Markdown table (README "Configuration"). */
import { z } from 'zod';
import { ConfigSchema } from '../platform/config';

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
console.log('| Key | Default | What it does |\n|---|---|---|\n' + rows.join('\n'));
