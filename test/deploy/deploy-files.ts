import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The operations pack under test (deploy/ at the repository root). */
export const deployDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../deploy');

/**
 * The path of a tool the deploy tests run (promtool, prometheus, docker-compose), or null when this
 * machine lacks it: those tests then skip with a message instead of failing (scripts/services.sh
 * installs them on Debian).
 */
export function tool(name: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, name);
    if (dir && existsSync(candidate)) return candidate;
  }
  return null;
}

/** Run a tool and return its output; a non-zero exit throws with its output in the message. */
export function run(file: string, args: string[], opts: { cwd?: string; env?: Record<string, string> } = {}): string {
  try {
    return execFileSync(file, args, {
      cwd: opts.cwd,
      env: { ...process.env, ...opts.env },
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${path.basename(file)} ${args.join(' ')} failed:\n${e.stdout ?? ''}${e.stderr ?? e.message}`);
  }
}
