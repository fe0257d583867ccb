import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import madge from 'madge';
import ts from 'typescript';
import { typeProgram } from './type-program';

/**
 * The import rules of ../shared/ARCHITECTURE.md, checked on the real import graph (madge reads
 * every TypeScript file, type-only imports included):
 * - no circular imports anywhere;
 * - contracts/ imports only contracts/ (schemas and names, no runtime code);
 * - monitoring/ imports only monitoring/ and contracts/;
 * - platform/ imports only platform/, contracts/ and monitoring/;
 * - api/, workers/ and scheduler/ import platform/, contracts/ and monitoring/, never each other;
 * - in those four folders only a repository (`*.repository.ts`) calls `.collection(` or
 *   `.collection<T>(` (also split over lines) or opens a `GridFSBucket`, besides the connection itself
 *   (platform/infra/mongo.ts: its probe and the indexes every process needs);
 * - the Runtime hands out an opaque `Store`, never the connection: only repositories,
 *   platform/infra/, the composition root (platform/runtime.ts), the test harness, benches, chaos
 *   runs and tests call `openStore` or import the `Database` type, and nothing reads `.db` off a
 *   Runtime;
 * - no repository lends a collection: outside `*.repository.ts`, no file of those four folders
 *   imports a repository export that is a mongodb `Collection`, or that returns one or an object
 *   holding one (checked with the type checker on the repository files, below).
 */
const ROOT = path.resolve(import.meta.dirname, '../..');
const FOLDERS = ['api', 'workers', 'scheduler', 'platform', 'contracts', 'monitoring'] as const;
type Folder = (typeof FOLDERS)[number];

const ALLOWED: Record<Folder, readonly Folder[]> = {
  contracts: ['contracts'],
  monitoring: ['monitoring', 'contracts'],
  platform: ['platform', 'contracts', 'monitoring'],
  api: ['api', 'platform', 'contracts', 'monitoring'],
  workers: ['workers', 'platform', 'contracts', 'monitoring'],
  scheduler: ['scheduler', 'platform', 'contracts', 'monitoring'],
};

describe('layout: the import graph', function () {
  this.timeout(60_000);
  let graph: Record<string, string[]>;
  let circular: string[][];

  before(async () => {
    const res = await madge(
      FOLDERS.map((f) => path.join(ROOT, f)),
      {
        baseDir: ROOT,
        fileExtensions: ['ts'],
        tsConfig: path.join(ROOT, 'tsconfig.json'),
        detectiveOptions: { ts: { skipTypeImports: false } },
      },
    );
    graph = res.obj();
    circular = res.circular();
  });

  it('when the runtime folders are read, then every one of them has files in the graph', () => {
    for (const f of FOLDERS)
      expect(
        Object.keys(graph).some((file) => file.startsWith(`${f}/`)),
        f,
      ).to.equal(true);
  });

  it('when the import graph is walked, then it has no cycle', () => {
    expect(circular.map((c) => c.join(' > '))).to.deep.equal([]);
  });

  it('when a file imports another folder, then the architecture allows that direction', () => {
    const wrong: string[] = [];
    for (const [file, deps] of Object.entries(graph)) {
      const from = file.split('/')[0] as Folder;
      if (!FOLDERS.includes(from)) continue;
      for (const dep of deps) {
        const to = dep.split('/')[0] as Folder;
        if (FOLDERS.includes(to) && !ALLOWED[from].includes(to)) wrong.push(`${file} → ${dep}`);
      }
    }
    expect(wrong).to.deep.equal([]);
  });
});

describe('layout: the doors to the database', () => {
  it('when api/, workers/, scheduler/ or platform/ reach a collection or a GridFS bucket, then they do it in a repository', () => {
    const files = execFileSync('git', ['ls-files', 'api', 'workers', 'scheduler', 'platform'], {
      cwd: ROOT,
      encoding: 'utf8',
    })
      .split('\n')
      .filter((f) => f.endsWith('.ts') && !f.endsWith('.repository.ts') && f !== 'platform/infra/mongo.ts')
      .filter((f) => fs.existsSync(path.join(ROOT, f)));
    // `.collection(` and `.collection<T>(`, also when a chain breaks the line before `.collection`.
    // A GridFS bucket is a pair of collections: opened in a repository too.
    const door = /\.\s*collection\s*[<(]|new\s+GridFSBucket\b/g;
    const doors = files.flatMap((f) => {
      const text = fs.readFileSync(path.join(ROOT, f), 'utf8');
      const lines = text.split('\n');
      return [...text.matchAll(door)].map((m) => {
        const at = text.slice(0, m.index + m[0].search(/collection|GridFSBucket/)).split('\n').length;
        return `${f}:${at}: ${lines[at - 1]!.trim()}`;
      });
    });
    expect(doors).to.deep.equal([]);
  });
});

/** Who may hold the connection itself (platform/infra/mongo.ts `openStore`, `Database`). */
const holdsConnection = (f: string) =>
  f.endsWith('.repository.ts') ||
  f.startsWith('platform/infra/') ||
  f === 'platform/runtime.ts' ||
  f.startsWith('test/') ||
  // The harness hands tests the connection; benches and chaos runs inspect what a run stored.
  /^scripts\/(harness|bench|chaos)\//.test(f) ||
  // Scripts that connect by themselves, as a process's runtime does (their own composition root).
  f === 'scripts/bootstrap.ts';

describe('layout: the store', () => {
  const files = execFileSync('git', ['ls-files', '*.ts'], { cwd: ROOT, encoding: 'utf8' })
    .split('\n')
    .filter((f) => f && !f.endsWith('.d.ts') && fs.existsSync(path.join(ROOT, f)));
  /** Lines of `files` matching `pattern` (comments skipped), as `file:line: code`. */
  const linesMatching = (list: string[], pattern: RegExp) =>
    list.flatMap((f) =>
      fs
        .readFileSync(path.join(ROOT, f), 'utf8')
        .split('\n')
        .flatMap((line, i) => {
          const code = line.trim();
          if (code.startsWith('*') || code.startsWith('//') || code.startsWith('/*')) return [];
          return pattern.test(code) ? [`${f}:${i + 1}: ${code}`] : [];
        }),
    );

  it('when a file opens the store, then it is a repository, infrastructure, the composition root, the harness or a test', () => {
    expect(
      linesMatching(
        files.filter((f) => !holdsConnection(f)),
        /\bopenStore\b/,
      ),
    ).to.deep.equal([]);
  });

  it('when a file imports the Database type, then it may hold the connection', () => {
    // Imports span lines: read the import statements whole.
    const wrong = files
      .filter((f) => !holdsConnection(f))
      .flatMap((f) =>
        [
          ...fs
            .readFileSync(path.join(ROOT, f), 'utf8')
            .matchAll(/import\s[^;]*?\bDatabase\b[^;]*?from\s*'[^']*infra\/mongo'/g),
        ].map((m) => `${f}: ${m[0].replace(/\s+/g, ' ')}`),
      );
    expect(wrong).to.deep.equal([]);
  });

  it('when code reads a Runtime, then it never takes `db` off it (the runtime has `store` and `dbHealth`)', () => {
    const offRuntime = /\b(rt|runtime)\.db\b|\{[^}]*\bdb\b[^}]*\}\s*=\s*(\w+\.)?(rt|runtime)\b|Pick<Runtime,[^>]*'db'/;
    expect(linesMatching(files, offRuntime)).to.deep.equal([]);
  });

  it('when platform/ code outside a repository runs, then it reads no collection off the connection', () => {
    const direct = /\b(db|deps\.db|ctx\.db)\.(accounts|apiKeys|jobs|ledger|audit|idempotency|rateLimits|db|client)\b/;
    const outside = files.filter((f) => /^(api|workers|scheduler|platform)\//.test(f) && !holdsConnection(f));
    expect(linesMatching(outside, direct)).to.deep.equal([]);
  });
});

/**
 * `file: export` of every repository export that is a mongodb Collection, or a function returning
 * one (awaited) or an object with one as a property. The type checker reads only the repository
 * files and what they import, so this stays a few seconds.
 */
function lendingExports(repositories: string[]): Set<string> {
  const { checker, exports } = typeProgram(ROOT, repositories);
  const isCollection = (t: ts.Type): boolean =>
    t.isUnion() ? t.types.some(isCollection) : (t.getSymbol() ?? t.aliasSymbol)?.getName() === 'Collection';
  const holds = (t: ts.Type, at: ts.Node) =>
    isCollection(t) || t.getProperties().some((p) => isCollection(checker.getTypeOfSymbolAtLocation(p, at)));
  const out = new Set<string>();
  for (const { file: f, src, symbols } of exports()) {
    for (const e of symbols) {
      const t = checker.getTypeOfSymbolAtLocation(e, src);
      const returns = t.getCallSignatures().map((s) => checker.getAwaitedType(s.getReturnType()) ?? s.getReturnType());
      if (isCollection(t) || returns.some((r) => holds(r, src))) out.add(`${f}: ${e.getName()}`);
    }
  }
  return out;
}

describe('layout: repositories lend no collection', function () {
  this.timeout(120_000);
  const tracked = execFileSync('git', ['ls-files', 'api', 'workers', 'scheduler', 'platform'], {
    cwd: ROOT,
    encoding: 'utf8',
  })
    .split('\n')
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts') && fs.existsSync(path.join(ROOT, f)));
  const repositories = tracked.filter((f) => f.endsWith('.repository.ts'));
  let lenders: Set<string>;
  before(() => {
    lenders = lendingExports(repositories);
  });

  it('when a file outside a repository imports from one, then it imports no collection (nor what hands one out)', () => {
    const wrong: string[] = [];
    for (const f of tracked.filter((x) => !x.endsWith('.repository.ts'))) {
      const src = ts.createSourceFile(f, fs.readFileSync(path.join(ROOT, f), 'utf8'), ts.ScriptTarget.Latest);
      for (const st of src.statements) {
        if (!(ts.isImportDeclaration(st) || ts.isExportDeclaration(st)) || !st.moduleSpecifier) continue;
        const spec = (st.moduleSpecifier as ts.StringLiteral).text;
        if (!spec.startsWith('.') || !spec.endsWith('.repository')) continue;
        const from = `${path.posix.join(path.posix.dirname(f), spec)}.ts`;
        const bindings = ts.isImportDeclaration(st) ? st.importClause?.namedBindings : st.exportClause;
        // A namespace import (`* as repo`) or `export *` takes every export.
        const names =
          !bindings || ts.isNamespaceImport(bindings) || ts.isNamespaceExport(bindings)
            ? [...lenders].filter((l) => l.startsWith(`${from}: `)).map((l) => l.slice(from.length + 2))
            : bindings.elements.map((el) => (el.propertyName ?? el.name).text);
        for (const n of names) {
          const key = `${from}: ${n}`;
          if (lenders.has(key)) wrong.push(`${f} imports ${key}`);
        }
      }
    }
    expect(wrong).to.deep.equal([]);
  });
});
