// better-sqlite3 has one connection: an async transaction must keep every other statement and
// transaction out until it ends, or they would run inside it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SqliteDb } from '../../src/store/sqlite/sqlite-db.js';

const tick = (ms = 5) => new Promise((r) => setTimeout(r, ms));

describe('SqliteDb', () => {
  let dir: string;
  let db: SqliteDb;
  beforeEach(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'hookline-sqlite-'));
    db = new SqliteDb(path.join(dir, 'x.db'));
    await db.run('CREATE TABLE t (n INTEGER)');
  });
  afterEach(async () => {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs concurrent transactions one after another', async () => {
    await Promise.all(
      Array.from({ length: 25 }, (_, i) =>
        db.transaction(async (tx) => {
          await tx.run('INSERT INTO t (n) VALUES ($1)', [i]);
          await tick(1);
          await tx.run('INSERT INTO t (n) VALUES ($1)', [i + 100]);
        }),
      ),
    );
    expect((await db.one<{ c: number }>('SELECT COUNT(*) AS c FROM t'))?.c).toBe(50);
  });

  it('keeps a statement issued during a transaction out of it', async () => {
    let inside!: () => void;
    const started = new Promise<void>((r) => (inside = r));
    const failing = db.transaction(async (tx) => {
      await tx.run('INSERT INTO t (n) VALUES (1)');
      inside();
      await tick(20);
      throw new Error('roll back');
    });
    await started;
    // Issued while the transaction is open: it must wait, and then not see the rolled-back row.
    const count = db.one<{ c: number }>('SELECT COUNT(*) AS c FROM t');
    await expect(failing).rejects.toThrow('roll back');
    expect((await count)?.c).toBe(0);
  });

  it('rewrites $n placeholders, including repeated ones', async () => {
    await db.run('INSERT INTO t (n) VALUES ($2), ($1), ($2)', [1, 2]);
    const rows = await db.all<{ n: number }>('SELECT n FROM t WHERE n = $1 OR n = $1 ORDER BY n', [2]);
    expect(rows).toEqual([{ n: 2 }, { n: 2 }]);
  });
});
