import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { expect } from 'chai';

const here = path.dirname(fileURLToPath(import.meta.url));
const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

/** Runs the child with `kind`; its exit status and its JSON log lines. */
async function crash(kind: 'reject' | 'throw') {
  const { LOG_FILE: _toStdout, ...env } = process.env;
  const child = spawn(process.execPath, ['--import', tsx, path.join(here, 'crash-only.child.ts'), kind], {
    env: { ...env, LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  const lines = out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: string; msg: string; err?: { message: string; stack: string } });
  return { code, lines, out };
}

describe('crash-only processes (runMain)', function () {
  this.timeout(60_000);

  for (const [kind, what, message] of [
    ['reject', 'unhandled rejection', 'a rejection nobody handles'],
    ['throw', 'uncaught exception', 'an exception nobody catches'],
  ] as const) {
    it(`when a running process meets an ${what}, then it logs it at fatal with its stack and exits 70`, async () => {
      const { code, lines, out } = await crash(kind);
      const fatal = lines.find((l) => l.level === 'fatal');
      expect(fatal, out).to.not.equal(undefined);
      expect(fatal!.msg).to.equal(`${what} in crashtest; exiting`);
      expect(fatal!.err!.message).to.equal(message);
      expect(fatal!.err!.stack).to.match(/crash-only\.child\.ts:\d+/);
      expect(code, out).to.equal(70);
    });
  }
});
