import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { expect } from 'chai';
import { transformSync } from 'esbuild';
import { mapStack } from '../../platform/infra/stack-map';

/** Logged stacks of the compiled service name the TypeScript lines (platform/infra/stack-map.ts). */
describe('stack traces mapped to the sources', () => {
  let dir: string;
  let file: string;
  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'stack-map-'));
    file = path.join(dir, 'main.js');
    // A compiled file and its linked map, as esbuild writes them into dist/.
    const out = transformSync(
      'export function boom(): never {\n  const why: string = "x";\n  throw new Error(why);\n}\n',
      { loader: 'ts', sourcefile: '../../api/thing.ts', sourcemap: 'external', format: 'esm' },
    );
    writeFileSync(file, out.code);
    writeFileSync(`${file}.map`, out.map);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('when a frame names a compiled file with a map, then it names the source file and line instead', () => {
    // `new Error` is on line 3, column 9 of the source; esbuild keeps the line.
    const stack = `Error: x\n    at boom (${file}:3:9)\n    at async ${pathToFileURL(file).href}:3:9\n    at Object.<anonymous> (/work/node_modules/x/index.js:1:1)\n    at node:internal/main:1:1`;
    const mapped = mapStack(stack).split('\n');
    expect(mapped[0]).to.equal('Error: x');
    expect(mapped[1]).to.equal('    at boom (api/thing.ts:3:9)');
    expect(mapped[2]).to.equal('    at async api/thing.ts:3:9');
    expect(mapped[3]).to.equal('    at Object.<anonymous> (/work/node_modules/x/index.js:1:1)'); // node_modules: as is
    expect(mapped[4]).to.equal('    at node:internal/main:1:1');
  });

  it('when a frame names a file without a map or a line the map does not cover, then the frame is left as it is', () => {
    const stack = `Error: y\n    at f (${path.join(dir, 'nomap.js')}:1:1)`;
    expect(mapStack(stack)).to.equal(stack);
  });
});
