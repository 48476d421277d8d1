// The embedded default generates its encryption key on first start, so `npm start` needs no set-up.
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { validateEncryptionKey } from '../config.js';

export function loadOrCreateKeyFile(dataDir: string): string {
  const file = path.join(dataDir, 'encryption.key');
  if (existsSync(file)) {
    return validateEncryptionKey(readFileSync(file, 'utf8'), file);
  }
  mkdirSync(dataDir, { recursive: true });
  const key = randomBytes(32).toString('base64');
  // 'wx' fails if another process created the file between our check and this write: read theirs.
  try {
    writeFileSync(file, key + '\n', { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST')
      return validateEncryptionKey(readFileSync(file, 'utf8'), file);
    throw err;
  }
  chmodSync(file, 0o600);
  return key;
}
