import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';

/**
 * Comments and docs explain the code to a reader who never saw our work queue: they cite the
 * SPEC where a rule comes from it, never one of our issue numbers (the word followed by a number),
 * which mean nothing outside our work queue. An upstream project's issue is cited with its `#` and name
 * ("FerretDB issue #2982") and is allowed. Scaffold markers (`[block:…]`) are not left behind.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');
const TEXT = /\.(ts|js|mjs|md|sh|json|jsonc|ya?ml|html|css)$|(^|\/)(Dockerfile|run)$/;

describe('layout: citations', () => {
  it('when tracked sources and docs are read, then none cites one of our issue numbers or keeps a scaffold marker', () => {
    const files = execFileSync('git', ['ls-files'], { cwd: ROOT, encoding: 'utf8' })
      .split('\n')
      .filter((f) => f && TEXT.test(f) && f !== 'package-lock.json' && fs.existsSync(path.join(ROOT, f)));
    const found: string[] = [];
    for (const f of files) {
      const lines = fs.readFileSync(path.join(ROOT, f), 'utf8').split('\n');
      lines.forEach((line, i) => {
        if (/\b[Ii]ssues? \d+\b/.test(line) || /\[block:[\w-]+\]/.test(line))
          found.push(`${f}:${i + 1}: ${line.trim()}`);
      });
    }
    expect(found).to.deep.equal([]);
  });
});
