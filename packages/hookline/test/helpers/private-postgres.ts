// A PostgreSQL cluster of the test's own, on its own port, that the test may stop and start at will
// (the shared server on 5432 must never go down under other suites). Needs the server binaries
// (initdb, pg_ctl); as root they run as the `postgres` OS user. Where that is impossible the suite is
// skipped with a visible notice, except in CI, where it must run.
import { execFile } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const REQUIRED = process.env.CI === 'true';

function findBin(): string | null {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const versions = readdirSync(root)
    .filter((v) => existsSync(path.join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] ? path.join(root, versions[0], 'bin') : null;
}

/** Root may not run the server: the `postgres` OS user's ids, read from /etc/passwd (name:x:uid:gid:…). */
function postgresUser(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const passwd = existsSync('/etc/passwd') ? readFileSync('/etc/passwd', 'utf8') : '';
  const fields = passwd
    .split('\n')
    .find((l) => l.startsWith('postgres:'))
    ?.split(':');
  return fields ? { uid: Number(fields[2]), gid: Number(fields[3]) } : null;
}

/** Why a private cluster cannot be had here, or null when it can. */
export function privatePostgresUnavailable(): string | null {
  if (!findBin()) return 'no PostgreSQL server binaries under /usr/lib/postgresql/*/bin';
  if (process.getuid?.() === 0 && !postgresUser()) return 'running as root without a `postgres` OS user';
  return null;
}

/** Skips (with a notice) or, in CI, fails: for `describe.runIf`. */
export const PRIVATE_POSTGRES: boolean = (() => {
  const reason = privatePostgresUnavailable();
  if (!reason) return true;
  if (REQUIRED) throw new Error(`a private PostgreSQL cluster is required in CI: ${reason}`);
  console.warn(`\n  NOTICE: private PostgreSQL cluster unavailable (${reason}); its suites are SKIPPED\n`);
  return false;
})();

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export interface PrivatePostgres {
  /** A connection string for its `postgres` database. */
  url: string;
  port: number;
  start(): Promise<void>;
  /** `immediate` is a crash: no checkpoint, recovery from the WAL at the next start. */
  stop(mode?: 'fast' | 'immediate'): Promise<void>;
  /** Stops it and removes its files. */
  destroy(): Promise<void>;
}

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const bin = findBin()!;
  const owner = postgresUser();
  const dir = mkdtempSync(path.join(tmpdir(), 'hookline-pg-'));
  if (owner) chownSync(dir, owner.uid, owner.gid);
  const data = path.join(dir, 'data');
  const log = path.join(dir, 'server.log');
  const port = await freePort();
  const as = async (cmd: string, args: string[]) => {
    const [file, argv] = owner
      ? ['runuser', ['-u', 'postgres', '--', path.join(bin, cmd), ...args]]
      : [path.join(bin, cmd), args];
    return run(file, argv, { timeout: 60_000 });
  };
  await as('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50`;
  let running = false;
  const pg: PrivatePostgres = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    start: async () => {
      await as('pg_ctl', ['-D', data, '-o', options, '-l', log, '-w', '-t', '60', 'start']);
      running = true;
    },
    stop: async (mode = 'fast') => {
      await as('pg_ctl', ['-D', data, '-m', mode, '-w', '-t', '60', 'stop']);
      running = false;
    },
    destroy: async () => {
      if (running) await pg.stop('immediate').catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
  await pg.start();
  return pg;
}
