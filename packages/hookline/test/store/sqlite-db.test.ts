// better-sqlite3 has one connection: an async transaction must keep every other statement and
// transaction out until it ends, or they would run inside it.
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SqliteCheckpointer } from '../../src/store/sqlite/checkpointer.js';
import Database from 'better-sqlite3';
import { SqliteDb, WAL_SIZE_LIMIT_BYTES } from '../../src/store/sqlite/sqlite-db.js';
import { eventually } from '../helpers/receiver.js';

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

  it('syncs WAL commits at checkpoints by default and at every commit with synchronous full', async () => {
    // PRAGMA synchronous: 1 is NORMAL, 2 is FULL.
    expect(await db.one('PRAGMA synchronous')).toEqual({ synchronous: 1 });
    const full = new SqliteDb(path.join(dir, 'full.db'), { synchronous: 'full' });
    expect(await full.one('PRAGMA synchronous')).toEqual({ synchronous: 2 });
    await full.close();
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

  it('keeps a statement waiting on one transaction out of the next one', async () => {
    const first = db.transaction(async () => tick(10));
    // Queued behind `first`: a transaction that writes and rolls back, and a plain read. When
    // `first` ends the rolled-back write must not be visible to the read.
    const second = db.transaction(async (tx) => {
      await tx.run('INSERT INTO t (n) VALUES (1)');
      await tick(10);
      throw new Error('roll back');
    });
    const count = db.one<{ c: number }>('SELECT COUNT(*) AS c FROM t');
    await first;
    await expect(second).rejects.toThrow('roll back');
    expect((await count)?.c).toBe(0);
  });

  it('rewrites $n placeholders, including repeated ones', async () => {
    await db.run('INSERT INTO t (n) VALUES ($2), ($1), ($2)', [1, 2]);
    const rows = await db.all<{ n: number }>('SELECT n FROM t WHERE n = $1 OR n = $1 ORDER BY n', [2]);
    expect(rows).toEqual([{ n: 2 }, { n: 2 }]);
  });

  it('takes turns with another connection sharing its thread lock instead of stalling in SQLite’s busy wait', async () => {
    // The delivery thread's connection shares the API thread's lock (store/sqlite/thread-lock.ts). Here
    // both live in one thread: without the shared lock the second BEGIN IMMEDIATE would block this
    // thread in SQLite's busy handler while the first transaction cannot finish, and fail after 5 s.
    const other = new SqliteDb(path.join(dir, 'x.db'), { threadLock: db.threadLock.buffer });
    const order: string[] = [];
    const first = db.transaction(async (tx) => {
      await tx.run('INSERT INTO t (n) VALUES (1)');
      await tick(50);
      order.push('first commits');
    });
    await tick(5);
    const second = other.transaction(async (tx) => {
      order.push('second starts');
      await tx.run('INSERT INTO t (n) VALUES (2)');
    });
    await Promise.all([first, second]);
    expect(order).toEqual(['first commits', 'second starts']);
    expect(await other.all('SELECT n FROM t ORDER BY n')).toEqual([{ n: 1 }, { n: 2 }]);
    await other.close();
  });

  it('a checkpointer thread copies the log into the database, so commits need not', async () => {
    // As in `hookline serve` and `hookline worker`: the connections stop checkpointing inside their
    // commits, and a thread of the process checkpoints on a timer, without the write lock.
    const file = path.join(dir, 'x.db');
    db.leaveCheckpoints();
    const before = statSync(file).size;
    const fill = (from: number) =>
      db.transaction(async (tx) => {
        for (let i = from; i < from + 2000; i++) await tx.run('INSERT INTO t (n) VALUES ($1)', [i]);
      });
    await fill(0);
    // Committed to the log only: the database file itself has not grown.
    expect(statSync(file).size).toBe(before);
    const checkpointer = await SqliteCheckpointer.start(file);
    try {
      await eventually(() => statSync(file).size > before);
      // And it goes on: what is committed later reaches the file too, while this connection writes.
      const grown = statSync(file).size;
      await fill(2000);
      await fill(4000);
      await eventually(() => statSync(file).size > grown);
    } finally {
      await checkpointer.stop();
    }
    expect(await db.one('SELECT COUNT(*) AS n FROM t')).toEqual({ n: 6000 });
  });

  it('cuts the log back to its size limit when it restarts after a burst', async () => {
    const file = path.join(dir, 'x.db');
    db.leaveCheckpoints();
    const walSize = () => statSync(`${file}-wal`).size;
    const blob = Buffer.alloc(64 * 1024, 7);
    const rows = Math.ceil((WAL_SIZE_LIMIT_BYTES * 1.25) / blob.length);
    await db.run('CREATE TABLE b (v BLOB)');
    await db.transaction(async (tx) => {
      for (let i = 0; i < rows; i++) await tx.run('INSERT INTO b (v) VALUES ($1)', [blob]);
    });
    expect(walSize()).toBeGreaterThan(WAL_SIZE_LIMIT_BYTES);
    // A checkpoint from another connection (as the checkpointer thread's), then the next commit
    // starts the log over.
    const other = new Database(file);
    try {
      other.pragma('wal_checkpoint(PASSIVE)');
    } finally {
      other.close();
    }
    await db.run('DELETE FROM b');
    expect(walSize()).toBeLessThanOrEqual(WAL_SIZE_LIMIT_BYTES);
  });
});
