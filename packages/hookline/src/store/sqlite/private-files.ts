// The SQLite files hold tenant ids, endpoint URLs, key hashes and sealed payloads: they are the
// owner's alone. SQLite creates a database 0644 and gives its -wal and -shm files the database's mode,
// so the database is created 0600 before SQLite opens it, in a directory created 0700. A umask would
// not do: worker threads (the delivery thread opens the file too) cannot change it.
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, statSync } from 'node:fs';
import path from 'node:path';

const PRIVATE_FILE = 0o600;
const PRIVATE_DIR = 0o700;

/** Makes `file` (and any -wal, -shm or -journal beside it) owner-only before SQLite opens it. */
export function preparePrivateDatabaseFile(file: string): void {
  // Only a directory created here is made 0700: an existing one is the operator's choice.
  mkdirSync(path.dirname(path.resolve(file)), { recursive: true, mode: PRIVATE_DIR });
  try {
    // 'wx': a file another process created meanwhile is left to the chmod below.
    closeSync(openSync(file, 'wx', PRIVATE_FILE));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  // Files created 0644 by earlier versions are narrowed too (and the umask may have narrowed ours).
  for (const f of [file, `${file}-wal`, `${file}-shm`, `${file}-journal`]) {
    if (!existsSync(f) || (statSync(f).mode & 0o777) === PRIVATE_FILE) continue;
    try {
      chmodSync(f, PRIVATE_FILE);
    } catch (err) {
      // Another user's file that we may open but not chmod: its mode is that owner's decision.
      if ((err as NodeJS.ErrnoException).code !== 'EPERM') throw err;
    }
  }
}
