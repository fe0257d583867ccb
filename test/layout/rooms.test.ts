import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import madge from 'madge';

/**
 * The house rules of docs/architecture.md, checked on the tracked files and the import graph:
 * - platform/ holds infrastructure in platform/infra/ and one folder per capability; its top
 *   level has no file but runtime.ts (the composition root every process builds);
 * - platform/infra/ imports no capability folder (capabilities build on infrastructure, never
 *   the reverse), and capability folders do not import each other in a circle;
 * - api/ holds routes only: services and repositories live in platform/<capability>/;
 * - api/, workers/ and scheduler/ reach the database only through repositories (no collection
 *   names, no collection of the database handle outside a `*.repository.ts`);
 * - a worker folder and an engine folder are named after the capability they serve, as its
 *   api/ or platform/ folder is (one name per capability);
 * - scripts/ never imports test/ (what both use lives in scripts/harness/);
 * - clients/ (the typed clients, shipped to customers) imports nothing of the server: only files of
 *   clients/ and the packages listed in package.json `dependencies`.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');
const tracked = execFileSync('git', ['ls-files'], { cwd: ROOT, encoding: 'utf8' })
  .split('\n')
  .filter((f) => f && fs.existsSync(path.join(ROOT, f)));
const subfolders = (dir: string): string[] => [
  ...new Set(
    tracked
      .filter((f) => f.startsWith(`${dir}/`))
      .map((f) => f.slice(dir.length + 1))
      .filter((f) => f.includes('/'))
      .map((f) => f.split('/')[0]!),
  ),
];

describe('layout: rooms', function () {
  this.timeout(60_000);
  let graph: Record<string, string[]>;

  before(async () => {
    const res = await madge(path.join(ROOT, 'platform'), {
      baseDir: ROOT,
      fileExtensions: ['ts'],
      tsConfig: path.join(ROOT, 'tsconfig.json'),
      detectiveOptions: { ts: { skipTypeImports: false } },
    });
    graph = res.obj();
  });

  it('when platform/ is listed, then its top level has folders and runtime.ts only', () => {
    const files = tracked.filter((f) => /^platform\/[^/]+$/.test(f));
    expect(files).to.deep.equal(['platform/runtime.ts']);
  });

  it('when platform/infra/ imports, then it imports no capability folder', () => {
    const wrong = Object.entries(graph)
      .filter(([file]) => file.startsWith('platform/infra/'))
      .flatMap(([file, deps]) =>
        deps.filter((d) => d.startsWith('platform/') && !d.startsWith('platform/infra/')).map((d) => `${file} → ${d}`),
      );
    expect(wrong).to.deep.equal([]);
  });

  it('when capability folders import each other, then no two of them form a circle', () => {
    const edges = new Map<string, Set<string>>();
    const room = (f: string) => f.split('/')[1]!;
    for (const [file, deps] of Object.entries(graph)) {
      if (!/^platform\/[^/]+\//.test(file) || file.startsWith('platform/infra/')) continue;
      for (const d of deps) {
        if (!/^platform\/[^/]+\//.test(d) || d.startsWith('platform/infra/') || room(d) === room(file)) continue;
        if (!edges.has(room(file))) edges.set(room(file), new Set());
        edges.get(room(file))!.add(room(d));
      }
    }
    const circles: string[] = [];
    const reach = (from: string, to: string, seen = new Set<string>()): boolean => {
      for (const n of edges.get(from) ?? []) {
        if (n === to) return true;
        if (seen.has(n)) continue;
        seen.add(n);
        if (reach(n, to, seen)) return true;
      }
      return false;
    };
    for (const [a, outs] of edges) for (const b of outs) if (a < b && reach(b, a)) circles.push(`${a} ↔ ${b}`);
    expect(circles).to.deep.equal([]);
  });

  it('when api/, workers/ and scheduler/ are read, then they reach the database only through repositories', () => {
    // Outside a `*.repository.ts`: no collection names and no collection of a database handle; the
    // runtime's `dbHealth` (up, down, whenUp) is theirs to read, and passing its store to a repository is fine.
    const door = /\bCOLLECTIONS\b|\bdb\.[A-Za-z_]\w*/;
    const found = tracked
      .filter((f) => /^(api|workers|scheduler)\/.*\.ts$/.test(f) && !f.endsWith('.repository.ts'))
      .flatMap((f) =>
        fs
          .readFileSync(path.join(ROOT, f), 'utf8')
          .split('\n')
          .flatMap((line, i) => {
            const code = line.trim();
            if (code.startsWith('*') || code.startsWith('//') || code.startsWith('/*')) return [];
            return door.test(code) ? [`${f}:${i + 1}: ${code}`] : [];
          }),
      );
    expect(found).to.deep.equal([]);
  });

  it('when api/ is listed, then it holds no service or repository', () => {
    expect(tracked.filter((f) => f.startsWith('api/') && /\.(service|repository)\.ts$/.test(f))).to.deep.equal([]);
  });

  it('when workers/ and its engines are listed, then every folder is named after a capability of api/ or platform/', () => {
    const capabilities = new Set([...subfolders('api'), ...subfolders('platform')]);
    const infra = new Set(['pool', 'engines']);
    const odd = [
      ...subfolders('workers')
        .filter((f) => !infra.has(f))
        .map((f) => `workers/${f}`),
      ...subfolders('workers/engines').map((f) => `workers/engines/${f}`),
    ].filter((f) => !capabilities.has(f.split('/').at(-1)!));
    expect(odd).to.deep.equal([]);
  });

  it('when scripts/ imports, then it never reaches into test/', () => {
    const wrong = tracked
      .filter((f) => f.startsWith('scripts/') && f.endsWith('.ts'))
      .filter((f) => /from\s+['"](\.\.\/)+test\//.test(fs.readFileSync(path.join(ROOT, f), 'utf8')));
    expect(wrong).to.deep.equal([]);
  });

  it('when clients/ imports, then it reaches nothing of the server: only clients/ and runtime dependencies', () => {
    const { dependencies } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    const files = tracked.filter((f) => f.startsWith('clients/') && /\.tsx?$/.test(f));
    expect(files).to.include('clients/typescript/index.ts');
    const wrong = files.flatMap((f) =>
      [...fs.readFileSync(path.join(ROOT, f), 'utf8').matchAll(/(?:from|import)\s*\(?\s*['"]([^'"]+)['"]/g)]
        .map((m) => m[1]!)
        .filter((spec) => {
          if (spec.startsWith('.')) return !path.join(path.dirname(f), spec).startsWith('clients/');
          if (spec.startsWith('node:')) return true;
          const pkg = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!;
          return !(pkg in dependencies);
        })
        .map((spec) => `${f} → ${spec}`),
    );
    expect(wrong).to.deep.equal([]);
  });
});
