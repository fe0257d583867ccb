import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';

/**
 * The documentation's shape: README.md stays a short entry point (at most 300 lines) and every
 * relative link in README.md and docs/**\/*.md reaches an existing file, and an existing heading
 * when it names one (`file.md#heading`), so moving or renaming a page or a section cannot leave a
 * dead link behind. Headings say what a thing is, never which issue made it.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');
const README_MAX_LINES = 300;

function markdownFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return markdownFiles(full);
    return name.endsWith('.md') ? [full] : [];
  });
}

/** The lines outside fenced code blocks, with inline code spans blanked out. */
function prose(text: string): string[] {
  let fenced = false;
  const out: string[] = [];
  for (const line of text.split('\n')) {
    if (line.trimStart().startsWith('```')) {
      fenced = !fenced;
      continue;
    }
    if (!fenced) out.push(line.replace(/`[^`]*`/g, (m) => ' '.repeat(m.length)));
  }
  return out;
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens, -1, -2 … for repeats. */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fenced = false;
  for (const line of text.split('\n')) {
    if (line.trimStart().startsWith('```')) fenced = !fenced;
    const m = !fenced && /^#{1,6} (.*)$/.exec(line);
    if (!m) continue;
    const base = (m[1] ?? '')
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\p{M} _-]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** Relative link targets of a markdown file: `[text](target)` and `![alt](target)`, outside code. */
function relativeLinks(text: string): string[] {
  const links: string[] = [];
  for (const line of prose(text)) {
    for (const m of line.matchAll(/\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1] ?? '';
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto: …
      links.push(target);
    }
  }
  return links;
}

describe('layout: the documentation', () => {
  const files = [path.join(ROOT, 'README.md'), ...markdownFiles(path.join(ROOT, 'docs'))];

  it(`README.md is at most ${README_MAX_LINES} lines`, () => {
    const lines = readFileSync(path.join(ROOT, 'README.md'), 'utf8').trimEnd().split('\n').length;
    expect(lines).to.be.at.most(README_MAX_LINES);
  });

  it('every relative link in README.md and docs/ reaches an existing file and heading', () => {
    const broken: string[] = [];
    let checked = 0;
    for (const file of files) {
      const text = readFileSync(file, 'utf8');
      for (const link of relativeLinks(text)) {
        checked++;
        const [target, anchor] = link.split('#', 2) as [string, string | undefined];
        const resolved = target === '' ? file : path.resolve(path.dirname(file), decodeURIComponent(target));
        const where = `${path.relative(ROOT, file)}: ${link}`;
        if (!existsSync(resolved)) {
          broken.push(`${where} (no such file)`);
          continue;
        }
        if (anchor && resolved.endsWith('.md') && !anchors(readFileSync(resolved, 'utf8')).has(anchor)) {
          broken.push(`${where} (no such heading)`);
        }
      }
    }
    expect(broken, broken.join('\n')).to.deep.equal([]);
    expect(checked).to.be.above(50);
  });

  it('no heading is titled by an issue number and no text cites "(issue N)"', () => {
    const found: string[] = [];
    for (const file of files) {
      readFileSync(file, 'utf8')
        .split('\n')
        .forEach((line, i) => {
          if (/^#{1,6} .*\bissues? \d/i.test(line) || /\(issues? \d[^)]*\)/i.test(line)) {
            found.push(`${path.relative(ROOT, file)}:${i + 1}: ${line}`);
          }
        });
    }
    expect(found, found.join('\n')).to.deep.equal([]);
  });
});
