import { spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
let built: Promise<void> | undefined;

/**
 * `npm run build` once per process (the benches and the tests of the compiled service): they
 * measure and check dist/ as `npm start` and the image run it, built from the sources as they are.
 * Under scripts/test.ts, once per test run (TEST_DIST_BUILT).
 */
export function ensureBuilt(): Promise<void> {
  // scripts/test.ts builds once before its lanes and says so: files in parallel workers must not
  // rewrite dist/ while another worker's processes load it.
  if (process.env.TEST_DIST_BUILT === '1') return Promise.resolve();
  built ??= (async () => {
    const child = spawn(process.execPath, [path.join(root, 'scripts/build.ts')], {
      cwd: root,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    const [code] = await once(child, 'exit');
    if (code !== 0) throw new Error(`the build failed (exit ${code})`);
  })();
  return built;
}
