import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const run = promisify(execFile);

/** A private PostgreSQL cluster and FerretDB over it (scripts/db-faults.sh), to break at will. */
export interface DbFaults {
  name: string;
  /** `mongodb://127.0.0.1:<port>/svc`: the private FerretDB. */
  url: string;
  /** SIGKILL the FerretDB process. */
  killFerretDb(): Promise<void>;
  /** Start FerretDB again; resolves once it answers ping. */
  startFerretDb(): Promise<void>;
  /** pg_ctl stop -m fast (FerretDB stays up and answers every command with an error). */
  stopPostgres(): Promise<void>;
  /** pg_ctl start; resolves once PostgreSQL accepts connections. */
  startPostgres(): Promise<void>;
  /** Stop both (by pid) and delete the cluster with every database in it. May be called twice. */
  down(): Promise<void>;
}

/**
 * `scripts/db-faults.sh up <name>`: the same private database the chaos run and a developer use,
 * under a name of its own (one per test run), so nothing here touches the machine's shared
 * PostgreSQL or FerretDB.
 */
export async function startDbFaults(name = `t${randomBytes(3).toString('hex')}`): Promise<DbFaults> {
  const sh = async (...args: string[]) =>
    (await run('bash', [path.join(root, 'scripts/db-faults.sh'), ...args], { cwd: root, timeout: 120_000 })).stdout;
  let downed: Promise<void> | undefined;
  const down = () => (downed ??= sh('down', name).then(() => undefined));
  let out: string;
  try {
    out = await sh('up', name);
  } catch (err) {
    await down().catch(() => {});
    throw err;
  }
  const url = out.trim().split('\n').pop()!;
  return {
    name,
    url,
    killFerretDb: () => sh('kill-ferretdb', name).then(() => undefined),
    startFerretDb: () => sh('start-ferretdb', name).then(() => undefined),
    stopPostgres: () => sh('stop-postgres', name).then(() => undefined),
    startPostgres: () => sh('start-postgres', name).then(() => undefined),
    down,
  };
}
