import { readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { fileURLToPath } from 'node:url';

/**
 * Stack traces of the compiled service (dist/, built by esbuild with linked source maps) mapped
 * back to the TypeScript sources, when an error is logged.
 *
 * Node's --enable-source-maps does the same for every stack, but it reads and parses each
 * module's map as the module loads: about 175 ms of the API's start with its dependencies
 * bundled. Here a map is read the first time a stack names its file, with Node's own
 * SourceMap, so the start pays nothing and an error pays once per file. Frames of files without
 * a map (node_modules, Node itself, the sources under tsx) are left as they are.
 */
const maps = new Map<string, SourceMap | null>();

function mapOf(file: string): SourceMap | null {
  let map = maps.get(file);
  if (map === undefined) {
    try {
      map = new SourceMap(JSON.parse(readFileSync(`${file}.map`, 'utf8')));
    } catch {
      map = null;
    }
    maps.set(file, map);
  }
  return map;
}

/** `at fn (file:line:col)` or `at file:line:col`, the file a path or a file: URL of a .js file. */
const FRAME = /^(\s*at (?:async )?(?:.*? \()?)((?:file:\/\/)?\/[^():]+\.js):(\d+):(\d+)(\)?)$/;

export function mapStack(stack: string): string {
  if (!stack.includes('.js:')) return stack;
  return stack
    .split('\n')
    .map((line) => {
      const m = FRAME.exec(line);
      if (!m) return line;
      const [, head, where, l, c, tail] = m as unknown as [string, string, string, string, string, string];
      const file = where.startsWith('file://') ? fileURLToPath(where) : where;
      if (file.includes('/node_modules/')) return line;
      const entry = mapOf(file)?.findEntry(Number(l) - 1, Number(c) - 1);
      if (!entry || !('originalSource' in entry) || !entry.originalSource) return line;
      // Sources are relative to the map (dist/chunks/…): keep the project path (api/app.ts).
      const source = entry.originalSource.replace(/^(?:file:\/\/)?(?:\.\.\/)+/, '');
      return `${head}${source}:${entry.originalLine + 1}:${entry.originalColumn + 1}${tail}`;
    })
    .join('\n');
}
