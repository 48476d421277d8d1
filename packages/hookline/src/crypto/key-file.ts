// The embedded default generates its encryption key on first start, so `npm start` needs no set-up.
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { validateEncryptionKey } from '../config.js';

export interface KeyFile {
  key: string;
  file: string;
  /** True only for the process that generated it: the first start, which tells where it went. */
  created: boolean;
}

export function loadOrCreateKeyFile(dataDir: string): KeyFile {
  const file = path.resolve(dataDir, 'encryption.key');
  const existing = () => ({
    key: validateEncryptionKey(readFileSync(file, 'utf8'), file),
    file,
    created: false,
  });
  if (existsSync(file)) return existing();
  // Owner only: the directory also holds the database (store/sqlite/private-files.ts).
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const key = randomBytes(32).toString('base64');
  // 'wx' fails if another process created the file between our check and this write: read theirs.
  try {
    writeFileSync(file, key + '\n', { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return existing();
    throw err;
  }
  // The mode given at creation is narrowed by the umask, never widened; chmod makes it exact.
  chmodSync(file, 0o600);
  return { key, file, created: true };
}
