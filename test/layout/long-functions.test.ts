import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import ts from 'typescript';

/**
 * The house rule on size (../shared/STYLE.md, "Comments and shape"): a function or class longer
 * than MAX_LINES lines is split by step, or says why it is not in a line starting with `Length:`
 * in the comment block directly above it (above the statement for `const f = () => …`).
 * Checked on every tracked .ts file outside test/, except the generated client types
 * (clients/typescript/schema.d.ts, written by scripts/client-gen.ts).
 */
const ROOT = path.resolve(import.meta.dirname, '../..');
const MAX_LINES = 150;
const GENERATED = new Set(['clients/typescript/schema.d.ts']);
const REASON = /^\s*(?:\/\/|\/\*\*?|\*)?\s*Length:\s*\S/m;

/** The statement, class member or property a function-like node is the whole of, or is an argument in. */
function host(node: ts.Node): ts.Node {
  let n = node;
  while (
    n.parent &&
    !ts.isSourceFile(n.parent) &&
    !ts.isStatement(n) &&
    !ts.isClassElement(n) &&
    !ts.isPropertyAssignment(n) &&
    !ts.isBlock(n.parent) &&
    !ts.isModuleBlock(n.parent)
  )
    n = n.parent;
  return n;
}

function nameOf(node: ts.Node, src: ts.SourceFile): string {
  const own = (node as { name?: ts.Node }).name;
  if (own) return own.getText(src);
  const p = node.parent;
  if (ts.isVariableDeclaration(p) || ts.isPropertyAssignment(p) || ts.isPropertyDeclaration(p))
    return p.name.getText(src);
  if (ts.isCallExpression(p)) return `(argument of ${p.expression.getText(src).slice(0, 40)})`;
  return '(anonymous)';
}

/** `file:line name (N lines)` for every long function-like node or class with no `Length:` reason above it. */
function offenders(file: string): string[] {
  const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
  const src = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const out: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) || ts.isClassLike(node)) {
      const first = src.getLineAndCharacterOfPosition(node.getStart(src)).line;
      const lines = src.getLineAndCharacterOfPosition(node.getEnd()).line - first + 1;
      if (lines > MAX_LINES) {
        const at = host(node);
        const comments = ts.getLeadingCommentRanges(text, at.getFullStart()) ?? [];
        const above = comments.map((c) => text.slice(c.pos, c.end)).join('\n');
        if (!REASON.test(above)) out.push(`${file}:${first + 1} ${nameOf(node, src)} (${lines} lines)`);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(src);
  return out;
}

describe('layout: function length', () => {
  it(`when a function or class spans more than ${MAX_LINES} lines, then a "Length:" line above it says why`, () => {
    const files = execFileSync('git', ['ls-files', '*.ts'], { cwd: ROOT, encoding: 'utf8' })
      .split('\n')
      .filter((f) => f && !f.startsWith('test/') && !GENERATED.has(f))
      .filter((f) => fs.existsSync(path.join(ROOT, f)));
    expect(files.length).to.be.greaterThan(100);
    const found = files.flatMap(offenders);
    expect(found, `split these, or give the reason in a "Length:" comment line:\n${found.join('\n')}`).to.deep.equal(
      [],
    );
  });
});
